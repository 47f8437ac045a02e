"""GPU state during a measurement, through NVML: clocks, temperature, power, utilisation, neighbours.

`NvmlSampler` polls in a background thread while a unit runs, and reports min/median/max per
metric plus any other process using the GPU (the figures are suspect when the GPU was not idle).
Without NVML every call degrades to `{"absent": reason}`.
"""

from __future__ import annotations

import os
import statistics
import threading
from typing import Any

from envcheck.core.execute import nvml_unavailable


def nvml_handle(torch_index: int = 0) -> Any:
    """The NVML handle of the CUDA device torch calls `torch_index` (matched by UUID when possible)."""
    import pynvml
    import torch

    uuid = str(getattr(torch.cuda.get_device_properties(torch_index), "uuid", "") or "")
    if uuid:
        try:
            return pynvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
        except Exception:
            pass
    return pynvml.nvmlDeviceGetHandleByIndex(torch_index)


def _sample(handle: Any) -> dict[str, float]:
    import pynvml

    util = pynvml.nvmlDeviceGetUtilizationRates(handle)
    return {
        "sm_clock_mhz": float(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)),
        "mem_clock_mhz": float(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM)),
        "temperature_c": float(pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)),
        "power_w": pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
        "gpu_util_pct": float(util.gpu),
        "mem_util_pct": float(util.memory),
    }


def other_processes(handle: Any) -> list[dict[str, Any]]:
    """Processes other than this one that hold a context on the GPU."""
    import pynvml

    procs = []
    for getter in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
        try:
            procs.extend(getattr(pynvml, getter)(handle))
        except Exception:
            continue
    mine = os.getpid()
    return [{"pid": int(p.pid), "used_memory": getattr(p, "usedGpuMemory", None)} for p in procs if p.pid != mine]


def idle_state(handle: Any) -> dict[str, Any]:
    """Whether the GPU looked idle before we started: other processes and current utilisation."""
    others = other_processes(handle)
    busy_pct = _sample(handle)["gpu_util_pct"]
    idle = not others and busy_pct < 5.0
    why = [f"{len(others)} other process(es) on the GPU"] if others else []
    if busy_pct >= 5.0:
        why.append(f"utilisation {busy_pct:.0f}% before the run")
    return {"idle": idle, "other_processes": others, "why_not_idle": "; ".join(why) or None}


class NvmlSampler:
    """Context manager that samples NVML every `period_s` in a daemon thread."""

    def __init__(self, torch_index: int = 0, period_s: float = 0.1) -> None:
        self._index = torch_index
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
                self._idle = idle_state(self._handle)
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
        stats = {
            key: {"min": min(v), "median": statistics.median(v), "max": max(v)}
            for key in self._samples[0]
            for v in [[s[key] for s in self._samples]]
        }
        return {"samples": len(self._samples), "metrics": stats, **self._idle}
