"""Every replayable bundle section besides `cuda`, in report order (see envcheck.checks.section)."""

from __future__ import annotations

from envcheck.checks import libraries, network
from envcheck.checks.section import Section

SECTIONS: tuple[Section, ...] = (
    libraries.SECTION,
    network.SECTION,
)
