"""Every replayable bundle section besides `cuda`, in report order (see envcheck.checks.section)."""

from __future__ import annotations

from envcheck.checks import gpu_health, libraries, network
from envcheck.checks.section import Section

SECTIONS: tuple[Section, ...] = (
    gpu_health.SECTION,
    libraries.SECTION,
    network.SECTION,
)
