"""The bench's "GPU not idle" judgement does not count envcheck's own processes.

No GPU here: NVML is simulated by a fake `pynvml` module (process lists and utilisation readings
taken from what the real H100 quick bench saw, tests/bench/data/h100_bench_quick.json), and the
process tree is either this test's real one (/proc) or a scripted parent map.
"""

from __future__ import annotations

import os
import subprocess
import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest

from envcheck.bench.gpu_state import idle_state
from envcheck.bench.units import judged
from tests.bench.h100 import h100_run


class FakeNvml(types.ModuleType):
    """Just the pynvml calls gpu_state makes; utilisation readings are consumed in order."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 0, 1, 0

    def __init__(self, pids: list[int], utils: list[float]) -> None:
        super().__init__("pynvml")
        self.pids, self.utils, self.slept = pids, list(utils), 0.0

    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list[Any]:
        return [types.SimpleNamespace(pid=p, usedGpuMemory=4114612224) for p in self.pids]

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: Any) -> list[Any]:
        return []

    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Any:
        value = self.utils.pop(0) if len(self.utils) > 1 else self.utils[0]
        return types.SimpleNamespace(gpu=value, memory=0)

    def nvmlDeviceGetClockInfo(self, handle: Any, kind: int) -> int:
        return 1980

    def nvmlDeviceGetTemperature(self, handle: Any, kind: int) -> int:
        return 40

    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int:
        return 72229


def fake_nvml(monkeypatch: pytest.MonkeyPatch, pids: list[int], utils: list[float]) -> FakeNvml:
    fake = FakeNvml(pids, utils)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    return fake


@pytest.fixture
def sibling() -> Iterator[int]:
    """A real child of this test process: stands in for the other bench worker (group bench-memory)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def _no_sleep(fake: FakeNvml) -> Any:
    def sleep(s: float) -> None:
        fake.slept += s
    return sleep


def test_the_other_bench_worker_is_envcheck_not_a_neighbour(monkeypatch: pytest.MonkeyPatch, sibling: int) -> None:
    """On the H100 the checkpoint unit saw the bench worker (PID 803) and warned "1 other process"."""
    assert h100_run()["units"][6]["gpu_state"]["why_not_idle"] == "1 other process(es) on the GPU"
    fake = fake_nvml(monkeypatch, [os.getpid(), sibling], [0.0])
    state = idle_state(object(), root=os.getpid(), sleep=_no_sleep(fake))
    assert state["idle"] is True and state["why_not_idle"] is None
    assert [p["pid"] for p in state["envcheck_processes"]] == [sibling] and state["other_processes"] == []
    assert f"envcheck's own: PIDs {sibling}" in state["seen"]


def test_a_real_neighbour_still_makes_the_gpu_not_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    """PID 1 is visible here and is not envcheck's: a certain "not idle"."""
    fake = fake_nvml(monkeypatch, [os.getpid(), 1], [0.0])
    state = idle_state(object(), root=os.getpid(), sleep=_no_sleep(fake))
    assert state["idle"] is False and "1 other process(es) on the GPU (PIDs 1)" in state["why_not_idle"]
    assert judged("x", {}, state).status.value == "warn"


def test_previous_units_utilisation_settles_before_judging(monkeypatch: pytest.MonkeyPatch) -> None:
    """device_memory saw 90% (matmul's work, in NVML's ~1 s average) and warned; after the settle delay it is 0%."""
    seen = h100_run()["units"][1]["gpu_state"]
    assert seen["why_not_idle"] == "utilisation 90% before the run" and seen["other_processes"] == []
    fake = fake_nvml(monkeypatch, [os.getpid()], [90.0, 0.0])
    state = idle_state(object(), root=os.getpid(), sleep=_no_sleep(fake))
    assert fake.slept > 1.0  # longer than NVML's averaging window
    assert state["idle"] is True and state["utilisation"] == {"first_pct": 90.0, "settled_pct": 0.0, "settle_s": 1.2}
    assert "utilisation 90% at the start" in state["seen"] and "0% after 1.2s" in state["seen"]


def test_utilisation_that_stays_busy_is_not_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = fake_nvml(monkeypatch, [os.getpid()], [100.0, 97.0])
    state = idle_state(object(), root=os.getpid(), sleep=_no_sleep(fake))
    assert state["idle"] is False
    assert state["why_not_idle"] == "utilisation 100% before the run, still 97% after 1.2s"


def test_host_pids_in_a_container_are_reported_not_judged(monkeypatch: pytest.MonkeyPatch) -> None:
    """NVML in a container lists host PIDs (ours is 7 here, NVML says 803 and 854): idle unknown, not "not idle"."""
    fake = fake_nvml(monkeypatch, [803, 854], [0.0])
    parents = {7: 1, 9: 1, 1: 0}  # the container's tree: envcheck (1) started workers 7 and 9
    state = idle_state(object(), root=1, me=7, parent=parents.get, tree=lambda: [1, 7, 9], sleep=_no_sleep(fake))
    assert state["idle"] is None and state["why_not_idle"] is None
    assert state["pid_namespace"].startswith("other") and len(state["foreign_namespace_processes"]) == 2
    assert "other process(es) (PIDs from another namespace" in state["idle_unknown"]
    result = judged("device copy", {}, state)
    assert result.status.value == "pass" and "GPU idle unknown" in result.summary


def test_more_host_pids_than_envcheck_has_processes_is_certainly_busy(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = fake_nvml(monkeypatch, [803, 854, 901, 902], [0.0])
    parents = {7: 1, 1: 0}
    state = idle_state(object(), root=1, me=7, parent=parents.get, tree=lambda: [1, 7], sleep=_no_sleep(fake))
    assert state["idle"] is False and "at least 2 other process(es)" in state["why_not_idle"]
