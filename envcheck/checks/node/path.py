"""The torch-free node path of `--for prolog|npd`: which checks run (inline, no fork server) and the facts it
reports instead of the torch worker's."""

from __future__ import annotations

import contextlib
import dataclasses
import platform
import sys
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from envcheck.core.check import CheckSpec
from envcheck.core.errors import UsageError
from envcheck.core.result import Result
from envcheck.probe.gpu_access import allocation, read_access
from envcheck.probe.nvml import Warmup, init_budget, release, warm_up
from envcheck.probe.pci import pci_gpus

# Share of the run's time left that the first GPU initialisation may take: the checks need the rest.
WARMUP_SHARE = 0.6


def node_specs(
    registry: Mapping[str, CheckSpec], only: Iterable[str] = (), skip: Iterable[str] = ()
) -> list[CheckSpec]:
    """The node checks (or `only` of them), run inline: no torch, no fork server (gpu.health reads NVML through
    its budgeted thread, so inline is safe)."""
    only, skip = list(only), list(skip)
    unknown = [n for n in [*only, *skip] if n not in registry]
    if unknown:
        raise UsageError(f"unknown check name(s): {', '.join(unknown)}; valid names: {', '.join(registry)}")
    # The specs' node_order (data on each spec): the driver API, NVML's hardware state and the kernel log, DCGM's
    # health watches and its own diagnostic where dcgmi is installed (they skip elsewhere), then the profile and
    # --expect-gpus.
    on_path = sorted(
        (s for s in registry.values() if s.node_order is not None), key=lambda s: s.node_order or 0
    )
    names = only or [s.name for s in on_path]
    return [dataclasses.replace(registry[n], isolated=False) for n in names if n not in skip]


def node_facts(results: Iterable[Result]) -> dict[str, Any]:
    """What the node path knows without torch (the torch worker's facts are not collected here)."""
    driver = next((r.measured.get("driver_version") for r in results if r.name == "gpu.health"), None)
    return {
        "envcheck": {"path": "node (torch-free)", "torch_imported": "torch" in sys.modules},
        "python": platform.python_version(),
        "host": platform.node(),
        "driver_version": driver,
        "torch": {"absent": "not imported: the node path runs without torch"},
    }


@contextlib.contextmanager
def warm_node(time_left_s: float | None) -> Iterator[Warmup | None]:
    """Hold NVML open while the node checks run, so the driver initialises each GPU once: with persistence mode
    off every client (NVML in gpu.health and node.profile, cuInit in node.cuda_driver's child) would otherwise pay
    the cold start again. The budget grows with the GPUs this process was given when persistence is off
    (probe.nvml.init_budget), within WARMUP_SHARE of the run's time left."""
    access = read_access()
    bus = pci_gpus()
    alloc = allocation(access, bus)
    gpus = alloc.count if alloc.count is not None else (len(bus) if isinstance(bus, list) else 0)
    if not gpus and not access.get("device_nodes"):
        yield None  # no GPU and no driver here: nothing to warm, and no NVML import to pay for
        return
    budget = init_budget(gpus, bool(access.get("persistenced")))
    if time_left_s is not None:
        budget = max(1.0, min(budget, time_left_s * WARMUP_SHARE))
    try:
        yield warm_up(budget)
    finally:
        release()
