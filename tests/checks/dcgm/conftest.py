"""Fixtures of the DCGM checks' tests."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest


@pytest.fixture
def hostengine() -> Iterator[int]:
    """A live process named as DCGM's daemon is (argv[0] nv-hostengine; real, not listening anywhere): what
    envcheck.probe.daemons finds of a running host engine."""
    proc = subprocess.Popen(["nv-hostengine", "60"], executable="/bin/sleep")
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()
