"""The suite's free ports (tests/helpers/ports.py) come from below the kernel's ephemeral range, bind when chosen, and
skip a port in use; where the range leaves no room below it, the kernel picks. Real sockets on 127.0.0.1."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.helpers import ports


def test_a_free_port_is_below_the_ephemeral_range_and_binds() -> None:
    low, _ = ports.ephemeral_range()
    for _ in range(20):
        port = ports.free_port()
        assert ports.FLOOR <= port < low
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_a_port_in_use_is_not_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", ports.free_port()))
        held.listen()
        taken = held.getsockname()[1]
        draws = iter([taken, taken, taken + 1 if taken + 1 < ports.ephemeral_range()[0] else taken - 1])
        monkeypatch.setattr(ports._draw, "randrange", lambda *_: next(draws))
        assert ports.free_port() != taken


def test_the_kernel_picks_where_the_range_starts_too_low(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ports, "ephemeral_range", lambda: (1024, 65535))
    port = ports.free_port()
    assert port >= 1024  # from the kernel's own range: nothing below it is free of its picks


def test_the_range_is_read_from_the_kernel_or_the_default(tmp_path: Path) -> None:
    told = tmp_path / "range"
    told.write_text("40000\t50000\n")
    assert ports.ephemeral_range(str(told)) == (40000, 50000)
    assert ports.ephemeral_range(str(tmp_path / "none")) == ports.EPHEMERAL_DEFAULT
    told.write_text("garbage\n")
    assert ports.ephemeral_range(str(told)) == ports.EPHEMERAL_DEFAULT
