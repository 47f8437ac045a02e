"""What each device was doing while it burned, sampled in a thread of the coordinator.

A GPU, through the one budgeted NVML reader (probe.nvml.read_nvml, its typed fields in probe.nvml_fields): SM and
memory clocks, temperature, power and the clock-event reasons (thermal, power brake, HW slowdown...), looked up by the
UUID the worker reported. A CPU worker, from /proc and its cgroup (probe.system, probe.cgroup): the share of a core it
got, and the share of the time its cgroup's CFS quota throttled it, the CPU's counterpart of a clock-event reason.
An NVML that cannot start or hangs stops the GPU samples and says why; nothing here stops the burn.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from envcheck.probe.cgroup import cpu_throttling
from envcheck.probe.nvml import hang_text, read_nvml
from envcheck.probe.nvml_fields import Fields, Missing
from envcheck.probe.system import process_cpu_seconds

SAMPLE_BUDGET_S = 5.0  # one NVML sample of every GPU; a GPU that hangs NVML longer is named, the samples stop
SAMPLES_MAX = 2000  # per device: the period grows with the budget


def period_for(budget_s: float) -> float:
    """Seconds between samples: 1 s, or longer for a long burn so each device keeps at most SAMPLES_MAX."""
    return max(1.0, budget_s / SAMPLES_MAX)


def _gpu_row(fields: Fields, handle: Any) -> dict[str, float]:
    got = {
        "sm_clock_mhz": fields.clock_mhz(handle, memory=False),
        "mem_clock_mhz": fields.clock_mhz(handle, memory=True),
        "temperature_c": fields.temperature(handle),
        "power_w": fields.power_w(handle),
        "clock_events": fields.clock_events(handle),
    }
    return {key: float(v) for key, v in got.items() if not isinstance(v, Missing)}


class Sampler:
    """Samples every device the workers report until stopped; `rows` holds one dict per device and sample."""

    def __init__(self, began: float, period_s: float) -> None:
        self.began, self.period_s = began, period_s
        self.rows: list[dict[str, Any]] = []
        self.gpu_absent: str | None = None
        self._gpus: dict[int, str] = {}  # worker -> GPU UUID
        self._cpus: dict[int, int] = {}  # worker -> pid
        self._last_cpu: dict[int, tuple[float, float, float]] = {}  # worker -> (at, cpu seconds, throttled s)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="envcheck-burn-sampler", daemon=True)

    def watch(self, worker: int, hello: dict[str, Any]) -> None:
        """Start sampling the device of a worker that said hello."""
        with self._lock:
            if hello.get("kind") == "cuda" and isinstance(hello.get("uuid"), str) and hello["uuid"]:
                self._gpus[worker] = hello["uuid"]
            elif hello.get("kind") == "cpu" and isinstance(hello.get("pid"), int):
                self._cpus[worker] = int(hello["pid"])

    def start(self) -> None:
        """Start the sampling thread."""
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling (the thread ends within one NVML budget at most)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=SAMPLE_BUDGET_S + 1)

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            with self._lock:
                gpus, cpus = dict(self._gpus), dict(self._cpus)
            at = time.monotonic() - self.began
            if gpus and self.gpu_absent is None:
                self._sample_gpus(gpus, at)
            for worker, pid in cpus.items():
                self._sample_cpu(worker, pid, at)

    def _sample_gpus(self, gpus: dict[int, str], at: float) -> None:
        def body(pynvml: Any, progress: dict[str, Any]) -> dict[int, dict[str, float]] | str:
            fields = Fields(pynvml)
            out = {}
            for worker, uuid in gpus.items():
                progress["gpu"] = worker
                handle = fields.handle_by_uuid(uuid)
                if not isinstance(handle, Missing):
                    out[worker] = _gpu_row(fields, handle)
            return out

        def unavailable(exc: BaseException) -> dict[int, dict[str, float]] | str:
            return f"NVML could not start: {exc}"

        got = read_nvml(body, unavailable, SAMPLE_BUDGET_S)
        if got.hang is not None:
            self.gpu_absent = hang_text(got.hang)
        elif isinstance(got.value, str):
            self.gpu_absent = got.value
        elif got.value is not None:
            self.rows += [{"at": round(at, 3), "worker": w, **row} for w, row in got.value.items()]

    def _sample_cpu(self, worker: int, pid: int, at: float) -> None:
        used = process_cpu_seconds(pid)
        throttle = cpu_throttling(pid)
        throttled = throttle["throttled_s"] if isinstance(throttle, dict) else 0.0
        if used is None:
            return
        last = self._last_cpu.get(worker)
        self._last_cpu[worker] = (at, used, throttled)
        if last is None or at <= last[0]:
            return
        wall = at - last[0]
        row: dict[str, Any] = {
            "at": round(at, 3),
            "worker": worker,
            "cpu_share": round(max(0.0, used - last[1]) / wall, 4),
            "throttled_share": round(max(0.0, throttled - last[2]) / wall, 4),
        }
        if isinstance(throttle, dict) and throttle.get("quota_cpus") is not None:
            row["quota_cpus"] = throttle["quota_cpus"]
        self.rows.append(row)
