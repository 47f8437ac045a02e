"""The torch-free node path of `--for prolog|npd`: which checks run (inline, no fork server) and the facts it
reports instead of the torch worker's."""

from __future__ import annotations

import dataclasses
import platform
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from envcheck.core.check import CheckSpec
from envcheck.core.errors import UsageError
from envcheck.core.result import Result

# In report order: the driver API, NVML's hardware state and the kernel log, then the profile.
NODE_CHECKS = ("node.cuda_driver", "gpu.health", "node.profile")


def node_specs(registry: Mapping[str, CheckSpec], only: Iterable[str] = (), skip: Iterable[str] = ()) -> list[CheckSpec]:
    """The node checks (or `only` of them), run inline: no torch, no fork server (gpu.health reads NVML through
    its budgeted thread, so inline is safe)."""
    only, skip = list(only), list(skip)
    unknown = [n for n in [*only, *skip] if n not in registry]
    if unknown:
        raise UsageError(f"unknown check name(s): {', '.join(unknown)}; valid names: {', '.join(registry)}")
    names = only or [n for n in NODE_CHECKS if n in registry]
    return [dataclasses.replace(registry[n], isolated=False) for n in names if n not in skip]


def node_facts(results: Iterable[Result]) -> dict[str, Any]:
    """What the node path knows without torch (the torch worker's facts are not collected here)."""
    driver = next((r.measured.get("driver_version") for r in results if r.name == "gpu.health"), None)
    return {"envcheck": {"path": "node (torch-free)", "torch_imported": "torch" in sys.modules},
            "python": platform.python_version(), "host": platform.node(), "driver_version": driver,
            "torch": {"absent": "not imported: the node path runs without torch"}}
