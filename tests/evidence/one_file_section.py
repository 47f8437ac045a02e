"""A whole replayable check in one module, as a newcomer would write it (CONTRIBUTING.md: Adding a check): its
capture, its shape check, its pure verdict, its Section and its CheckSpec. Nothing else in the package changes."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from envcheck.core.check import CheckSpec, Context
from envcheck.core.result import Result, passed, warned
from envcheck.core.section import Section, require


def capture() -> dict[str, Any]:
    """Read the live system: here, the host's load average."""
    return {"load1": os.getloadavg()[0], "cpus": os.cpu_count() or 1}


def validate(data: Any, where: str) -> None:
    """A bundle's section must hold numbers."""
    require(data, where, {"load1": (float, int), "cpus": (int,)})


def verdict(data: Mapping[str, Any], ctx: Context) -> Result:
    """Warn when the load exceeds four times the CPUs (a pure function of the captured data)."""
    if data["load1"] > 4 * data["cpus"]:
        return warned(
            f"load {data['load1']:.1f} on {data['cpus']} CPUs",
            "find what loads the host",
            fault_class="node",
            code="host.overloaded",
        )
    return passed(f"load {data['load1']:.1f} on {data['cpus']} CPUs")


SECTION = Section("host_load", "host.load", capture, validate, verdict)
CHECKS = (CheckSpec("host.load", SECTION.judge, "the host is not overloaded", isolated=False),)
