"""GPU state during a measurement, through NVML: clocks, temperature, power, utilisation, neighbours.

`NvmlSampler` polls in a background thread while a unit runs, and reports min/median/max per
metric plus any other process using the GPU (the figures are suspect when the GPU was not idle).
envcheck's own processes (the other bench worker, the previous unit's utilisation) do not count.
Without NVML every call degrades to `{"absent": reason}`.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from envcheck.probe.nvml import unavailable as nvml_unavailable
from envcheck.probe.nvml_fields import Fields, Missing


def _fields() -> Fields:
    import pynvml

    return Fields(pynvml)


def nvml_handle(torch_index: int = 0) -> Any:
    """The NVML handle of the CUDA device torch calls `torch_index` (matched by UUID when possible)."""
    import torch

    fields = _fields()
    uuid = str(getattr(torch.cuda.get_device_properties(torch_index), "uuid", "") or "")
    if uuid:
        found = fields.handle_by_uuid(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
        if not isinstance(found, Missing):
            return found
    found = fields.handle(torch_index)
    if isinstance(found, Missing):
        raise RuntimeError(f"{found.call}: {found.error}")
    return found


def _sample(handle: Any) -> dict[str, float]:
    """One reading of each metric. A metric the GPU does not support is left out; any other NVML error raises
    (the sampler stops and says why)."""
    fields = _fields()
    util = fields.utilization(handle)
    got: dict[str, float | Missing] = {
        "sm_clock_mhz": fields.clock_mhz(handle, memory=False),
        "mem_clock_mhz": fields.clock_mhz(handle, memory=True),
        "temperature_c": fields.temperature(handle),
        "power_w": fields.power_w(handle),
        "gpu_util_pct": util if isinstance(util, Missing) else util["gpu_pct"],
        "mem_util_pct": util if isinstance(util, Missing) else util["memory_pct"],
    }
    failed = [m for m in got.values() if isinstance(m, Missing) and not m.not_supported]
    if failed:
        raise RuntimeError(f"{failed[0].call}: {failed[0].error}")
    return {key: float(v) for key, v in got.items() if not isinstance(v, Missing)}


# NVML's utilisation is the share of time a kernel ran over its last sample window (1/6 s to 1 s
# by product): right after envcheck's previous unit it still shows that unit's work.
SETTLE_S = 1.2
BUSY_PCT = 5.0


def nvml_processes(handle: Any) -> list[dict[str, Any]]:
    """Every process NVML lists with a context on the GPU (PIDs as NVML sees them)."""
    return [{"pid": pid, "used_memory": used} for pid, used in _fields().context_holders(handle).items()]


def proc_parent(pid: int) -> int | None:
    """The parent PID of `pid` from /proc, or None when `pid` is not visible in our PID namespace."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    try:
        return int(stat.rsplit(")", 1)[1].split()[1])
    except (IndexError, ValueError):
        return None


def descends_from(pid: int, root: int, parent: Callable[[int], int | None] = proc_parent) -> bool | None:
    """True when `pid` is `root` or its descendant, False when not, None when `pid` is not visible."""
    seen: set[int] = set()
    current: int | None = pid
    while current and current not in seen:
        if current == root:
            return True
        seen.add(current)
        up = parent(current)
        if up is None and current == pid:
            return None
        current = up
    return False


def envcheck_tree(
    root: int,
    children: Callable[[], list[int]] | None = None,
    parent: Callable[[int], int | None] = proc_parent,
) -> list[int]:
    """Visible PIDs of the envcheck run: `root` (the process that started the workers) and its descendants."""
    pids = children() if children is not None else [int(d) for d in os.listdir("/proc") if d.isdigit()]
    return sorted(p for p in pids if descends_from(p, root, parent))


def classify_processes(
    procs: list[dict[str, Any]],
    *,
    me: int,
    root: int,
    parent: Callable[[int], int | None] = proc_parent,
    tree: Callable[[], list[int]] | None = None,
) -> dict[str, Any]:
    """Sort NVML's processes into envcheck's own, others, and PIDs from another PID namespace.

    This process holds a context when called, so NVML lists it; when its PID is not in the list,
    NVML reports PIDs of another namespace (a container sees host PIDs) and no PID can be matched:
    only a count beyond the run's own processes is certain.
    """
    pids = [p["pid"] for p in procs]
    out: dict[str, Any] = {
        "envcheck_processes": [],
        "other_processes": [],
        "foreign_namespace_processes": [],
        "pid_namespace": "same",
    }
    if not procs:
        out["pid_namespace"] = "unknown (NVML lists no process, not even this one)"
        return out
    if me not in pids:
        out["pid_namespace"] = (
            "other (NVML reports PIDs from another PID namespace, e.g. host PIDs in a container)"
        )
        ours = envcheck_tree(root, tree, parent)
        out["foreign_namespace_processes"] = procs
        out["envcheck_process_count"] = len(ours)
        out["certain_others"] = max(0, len(procs) - len(ours))
        return out
    for proc in procs:
        if proc["pid"] == me:
            continue
        mine = descends_from(proc["pid"], root, parent)
        key = {True: "envcheck_processes", False: "other_processes", None: "foreign_namespace_processes"}[
            mine
        ]
        out[key].append(proc)
    out["certain_others"] = len(out["other_processes"])
    return out


def idle_state(
    handle: Any,
    *,
    root: int | None = None,
    me: int | None = None,
    parent: Callable[[int], int | None] = proc_parent,
    tree: Callable[[], list[int]] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    settle_s: float = SETTLE_S,
) -> dict[str, Any]:
    """Whether the GPU looked idle before we started, not counting envcheck's own processes.

    `root` is the envcheck process that started the bench workers (default: our parent); any
    process descending from it is ours (the other bench worker, ranks). Utilisation is sampled
    now, and when busy again after `settle_s` (longer than NVML's averaging window), so the
    previous unit's work does not count. `idle` is True, False (certain), or None (unknown:
    processes whose PIDs we cannot match).
    """
    me = os.getpid() if me is None else me
    root = os.getppid() if root is None else root
    procs = classify_processes(nvml_processes(handle), me=me, root=root, parent=parent, tree=tree)
    measured = _sample(handle).get("gpu_util_pct")
    # a GPU without utilisation counters (NVML_ERROR_NOT_SUPPORTED, e.g. a MIG slice) has no reading, never 0%
    util: dict[str, Any] = {"first_pct": measured} if measured is not None else {"absent": "not supported"}
    first = busy = measured or 0.0
    if measured is not None and first >= BUSY_PCT:
        sleep(settle_s)
        busy = util["settled_pct"] = _sample(handle).get("gpu_util_pct", 0.0)
        util["settle_s"] = settle_s
    why: list[str] = []
    if procs["other_processes"]:
        why.append(
            f"{len(procs['other_processes'])} other process(es) on the GPU (PIDs "
            + ", ".join(str(p["pid"]) for p in procs["other_processes"])
            + ")"
        )
    elif procs["foreign_namespace_processes"] and procs.get("certain_others", 0) > 0:
        why.append(
            f"at least {procs['certain_others']} other process(es) on the GPU: "
            f"{len(procs['foreign_namespace_processes'])} with PIDs from another namespace, "
            f"envcheck has {procs.get('envcheck_process_count', 0)}"
        )
    if busy >= BUSY_PCT:
        after = f", still {busy:.0f}% after {settle_s:g}s" if "settled_pct" in util else ""
        why.append(f"utilisation {first:.0f}% before the run{after}")
    unknown = None
    if not why and procs["foreign_namespace_processes"]:
        unknown = (
            f"{len(procs['foreign_namespace_processes'])} other process(es) (PIDs from another namespace: "
            "cannot tell envcheck's own workers from others)"
        )
    elif not why and measured is None:
        unknown = "NVML gives no utilisation for this GPU (not supported): no other process, load unknown"
    seen = []
    if procs["envcheck_processes"]:
        seen.append("envcheck's own: PIDs " + ", ".join(str(p["pid"]) for p in procs["envcheck_processes"]))
    if "settled_pct" in util and busy < BUSY_PCT:
        seen.append(
            f"utilisation {first:.0f}% at the start (NVML's average still held envcheck's previous work), "
            f"{busy:.0f}% after {settle_s:g}s"
        )
    return {
        "idle": False if why else (None if unknown else True),
        **procs,
        "utilisation": util,
        "why_not_idle": "; ".join(why) or None,
        "idle_unknown": unknown,
        "seen": "; ".join(seen) or None,
    }


def _hold_context(index: int) -> None:
    """Make sure this process holds a CUDA context on the GPU, so NVML lists it (see classify_processes)."""
    import torch

    torch.zeros(1, device=f"cuda:{index}")
    torch.cuda.synchronize(index)


class NvmlSampler:
    """Context manager that samples NVML every `period_s` in a daemon thread."""

    def __init__(self, torch_index: int = 0, period_s: float = 0.1, root_pid: int | None = None) -> None:
        self._index = torch_index
        self._root = root_pid
        self._period = period_s
        self._samples: list[dict[str, float]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._absent: str | None = None
        self._handle: Any = None
        self._idle: dict[str, Any] = {}

    def __enter__(self) -> NvmlSampler:
        self._absent = nvml_unavailable()
        if self._absent is None:
            try:
                self._handle = nvml_handle(self._index)
                _hold_context(self._index)
                self._idle = idle_state(self._handle, root=self._root)
            except Exception as exc:
                self._absent = f"NVML query failed: {exc}"
        if self._absent is None:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._samples.append(_sample(self._handle))
            except Exception as exc:
                self._absent = f"NVML sampling failed: {exc}"
                return
            self._stop.wait(self._period)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def summary(self) -> dict[str, Any]:
        """min/median/max per metric over the samples, plus the idle state."""
        if self._absent is not None or not self._samples:
            return {"absent": self._absent or "no NVML samples were taken"}
        keys = dict.fromkeys(key for s in self._samples for key in s)  # a metric left out is absent, not zero
        stats = {
            key: {"min": min(v), "median": statistics.median(v), "max": max(v)}
            for key in keys
            for v in [[s[key] for s in self._samples if key in s]]
        }
        return {"samples": len(self._samples), "metrics": stats, **self._idle}
