"""The suite's free ports (tests/helpers/ports.py) come from the band below the kernel's ephemeral range, bind when
chosen, skip a port in use or already handed out; where the range leaves no band, the kernel picks. Real sockets on
127.0.0.1."""

from __future__ import annotations

import itertools
import socket
from pathlib import Path

import pytest

from tests.helpers import ports

NO_BAND = ports.band_top() - ports.BAND[0] < 1000


@pytest.mark.skipif(NO_BAND, reason="this host's ephemeral range starts too low to leave a band below it")
def test_a_free_port_is_in_the_band_below_the_ephemeral_range_binds_and_is_never_handed_out_twice() -> None:
    given = [ports.free_port() for _ in range(50)]
    assert all(ports.BAND[0] <= port < ports.band_top() < ports.ephemeral_range()[0] + 1 for port in given), (
        given
    )
    assert len(set(given)) == len(given)
    for port in given:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


@pytest.mark.skipif(NO_BAND, reason="this host's ephemeral range starts too low to leave a band below it")
def test_a_port_in_use_or_handed_out_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    handed = ports.free_port()
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        in_use = held.getsockname()[1]
        after = ports.free_port()  # a free one, drawn after the two that must be skipped
        draws = itertools.chain([in_use, handed, in_use, after], iter(lambda: after, None))
        monkeypatch.setattr(ports._draw, "randrange", lambda *_: next(draws))
        monkeypatch.setattr(ports, "_handed", {handed})  # `after` as if never handed out
        assert ports.free_port() == after


def test_the_kernel_picks_where_the_range_starts_too_low(monkeypatch: pytest.MonkeyPatch) -> None:
    low, high = ports.ephemeral_range()
    monkeypatch.setattr(ports, "ephemeral_range", lambda: (ports.BAND[0] + 10, high))
    port = ports.free_port()
    assert low <= port <= high  # the kernel's own pick (the real range, not the one staged)


def test_the_range_is_read_from_the_kernel_or_the_default(tmp_path: Path) -> None:
    told = tmp_path / "range"
    told.write_text("40000\t50000\n")
    assert ports.ephemeral_range(str(told)) == (40000, 50000)
    assert ports.ephemeral_range(str(tmp_path / "none")) == ports.EPHEMERAL_DEFAULT
    told.write_text("garbage\n")
    assert ports.ephemeral_range(str(told)) == ports.EPHEMERAL_DEFAULT
