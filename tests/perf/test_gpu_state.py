"""The bench's "GPU not idle" judgement does not count envcheck's own processes.

No GPU here: NVML is simulated by the one NVML fake, tests/staging/nvml.py (process lists and utilisation readings
taken from what the real H100 quick bench saw, tests/perf/data/h100_bench_quick.json), and the
process tree is either this test's real one (/proc) or a scripted parent map.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from envcheck.perf import gpu_state
from envcheck.perf.gpu_state import idle_state
from envcheck.perf.unit_run import judged
from tests.perf.h100 import h100_run
from tests.staging import nvml


class Sleeps:
    """A sleep that only counts (the settle delay is judged, not waited for)."""

    def __init__(self) -> None:
        self.slept = 0.0

    def __call__(self, s: float) -> None:
        self.slept += s


class FakeGpu:
    """The one NVML fake (tests/staging/nvml.py) holding one H100 with these processes and utilisation readings
    (answered in order, the last one repeated): `handle` is its NVML handle."""

    def __init__(
        self, monkeypatch: pytest.MonkeyPatch, folder: Path, pids: list[int], utils: list[float]
    ) -> None:
        gpu = nvml.gpu(
            0,
            uuid="GPU-0",
            processes=[{"pid": p, "used_mib": 3924} for p in pids],
            utilization=[[u, 0] for u in utils],
            temperature_c=40,
            power_w=72.229,
            sm_clock_mhz=1980,
            mem_clock_mhz=1980,
        )
        self.handle = nvml.install(monkeypatch, folder, nvml.state(gpu)).nvmlDeviceGetHandleByIndex(0)
        self.sleep = Sleeps()

    @property
    def slept(self) -> float:
        """Seconds the judgement asked to sleep."""
        return self.sleep.slept


def fake_nvml(monkeypatch: pytest.MonkeyPatch, folder: Path, pids: list[int], utils: list[float]) -> FakeGpu:
    return FakeGpu(monkeypatch, folder, pids, utils)


@pytest.fixture
def sibling() -> Iterator[int]:
    """A real child of this test process: stands in for the other bench worker (group bench-memory)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def test_the_other_bench_worker_is_envcheck_not_a_neighbour(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, sibling: int
) -> None:
    """On the H100 the checkpoint unit saw the bench worker (PID 803) and warned "1 other process"."""
    assert h100_run()["units"][6]["gpu_state"]["why_not_idle"] == "1 other process(es) on the GPU"
    fake = fake_nvml(monkeypatch, tmp_path, [os.getpid(), sibling], [0.0])
    state = idle_state(fake.handle, root=os.getpid(), sleep=fake.sleep)
    assert state["idle"] is True and state["why_not_idle"] is None
    assert [p["pid"] for p in state["envcheck_processes"]] == [sibling] and state["other_processes"] == []
    assert f"envcheck's own: PIDs {sibling}" in state["seen"]


def test_a_real_neighbour_still_makes_the_gpu_not_idle(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """PID 1 is visible here and is not envcheck's: a certain "not idle"."""
    fake = fake_nvml(monkeypatch, tmp_path, [os.getpid(), 1], [0.0])
    state = idle_state(fake.handle, root=os.getpid(), sleep=fake.sleep)
    assert state["idle"] is False and "1 other process(es) on the GPU (PIDs 1)" in state["why_not_idle"]
    assert judged("x", {}, state).status.value == "warn"


def test_previous_units_utilisation_settles_before_judging(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """device_memory saw 90% (matmul's work, in NVML's ~1 s average) and warned; after the settle delay it is 0%."""
    seen = h100_run()["units"][1]["gpu_state"]
    assert seen["why_not_idle"] == "utilisation 90% before the run" and seen["other_processes"] == []
    fake = fake_nvml(monkeypatch, tmp_path, [os.getpid()], [90.0, 0.0])
    state = idle_state(fake.handle, root=os.getpid(), sleep=fake.sleep)
    assert fake.slept > 1.0  # longer than NVML's averaging window
    assert state["idle"] is True and state["utilisation"] == {
        "first_pct": 90.0,
        "settled_pct": 0.0,
        "settle_s": 1.2,
    }
    assert "utilisation 90% at the start" in state["seen"] and "0% after 1.2s" in state["seen"]


def test_utilisation_that_stays_busy_is_not_idle(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = fake_nvml(monkeypatch, tmp_path, [os.getpid()], [100.0, 97.0])
    state = idle_state(fake.handle, root=os.getpid(), sleep=fake.sleep)
    assert state["idle"] is False
    assert state["why_not_idle"] == "utilisation 100% before the run, still 97% after 1.2s"


def test_host_pids_in_a_container_are_reported_not_judged(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """NVML in a container lists host PIDs (ours is 7 here, NVML says 803 and 854): idle unknown, not "not idle"."""
    fake = fake_nvml(monkeypatch, tmp_path, [803, 854], [0.0])
    parents = {7: 1, 9: 1, 1: 0}  # the container's tree: envcheck (1) started workers 7 and 9
    state = idle_state(
        fake.handle, root=1, me=7, parent=parents.get, tree=lambda: [1, 7, 9], sleep=fake.sleep
    )
    assert state["idle"] is None and state["why_not_idle"] is None
    assert state["pid_namespace"].startswith("other") and len(state["foreign_namespace_processes"]) == 2
    assert "other process(es) (PIDs from another namespace" in state["idle_unknown"]
    result = judged("device copy", {}, state)
    assert result.status.value == "pass" and "GPU idle unknown" in result.summary


def test_more_host_pids_than_envcheck_has_processes_is_certainly_busy(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = fake_nvml(monkeypatch, tmp_path, [803, 854, 901, 902], [0.0])
    parents = {7: 1, 1: 0}
    state = idle_state(fake.handle, root=1, me=7, parent=parents.get, tree=lambda: [1, 7], sleep=fake.sleep)
    assert state["idle"] is False and "at least 2 other process(es)" in state["why_not_idle"]


def test_sampler_reads_every_metric_through_the_one_nvml_reader(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The sampler's readings come through probe/nvml_fields (clocks, temperature, watts from milliwatts, utilisation)."""
    gpu = nvml.gpu(
        0,
        uuid="GPU-0",
        utilization=[[37, 12]],
        temperature_c=40,
        power_w=72.229,
        sm_clock_mhz=1905,
        mem_clock_mhz=2619,
    )  # the real H100's clocks: SM and memory told apart
    handle = nvml.install(monkeypatch, tmp_path, nvml.state(gpu)).nvmlDeviceGetHandleByIndex(0)
    assert gpu_state._sample(handle) == {
        "sm_clock_mhz": 1905.0,
        "mem_clock_mhz": 2619.0,
        "temperature_c": 40.0,
        "power_w": 72.229,
        "gpu_util_pct": 37.0,
        "mem_util_pct": 12.0,
    }


def test_a_metric_the_gpu_does_not_support_is_left_out_not_zero(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """NVML_ERROR_NOT_SUPPORTED for power (boards without a power sensor) drops that metric; the rest are read."""
    gpu = nvml.gpu(0, uuid="GPU-0", power_w=None, processes=[{"pid": os.getpid(), "used_mib": 1}])
    handle = nvml.install(monkeypatch, tmp_path, nvml.state(gpu)).nvmlDeviceGetHandleByIndex(0)
    sample = gpu_state._sample(handle)
    assert "power_w" not in sample and sample["sm_clock_mhz"] == 1980.0


def test_another_nvml_error_stops_the_sampler_naming_the_call(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """NVML_ERROR_GPU_IS_LOST (15) while sampling is a failure with the call's name, never a made-up reading."""
    gpu = nvml.gpu(0, uuid="GPU-0", temperature_c={"nvml_error": 15})
    handle = nvml.install(monkeypatch, tmp_path, nvml.state(gpu)).nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(RuntimeError, match="^nvmlDeviceGetTemperature: "):
        gpu_state._sample(handle)


def test_compute_and_graphics_contexts_are_both_listed_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    gpu = nvml.gpu(
        0,
        uuid="GPU-0",
        processes=[{"pid": 11, "used_mib": 2}],
        graphics_processes=[{"pid": 11, "used_mib": 2}, {"pid": 12, "used_mib": 1}],
    )
    handle = nvml.install(monkeypatch, tmp_path, nvml.state(gpu)).nvmlDeviceGetHandleByIndex(0)
    assert gpu_state.nvml_processes(handle) == [
        {"pid": 11, "used_memory": 2 * 2**20},
        {"pid": 12, "used_memory": 2**20},
    ]


def test_a_gpu_without_utilisation_counters_is_idle_unknown_not_idle(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """NVML_ERROR_NOT_SUPPORTED for utilisation (a MIG slice): no made-up 0%, the load is unknown."""
    gpu = nvml.gpu(0, uuid="GPU-0", utilization=None, processes=[{"pid": os.getpid(), "used_mib": 1}])
    handle = nvml.install(monkeypatch, tmp_path, nvml.state(gpu)).nvmlDeviceGetHandleByIndex(0)
    state = idle_state(handle, root=os.getpid(), sleep=Sleeps())
    assert state["idle"] is None and state["utilisation"] == {"absent": "not supported"}
    assert "no utilisation for this GPU" in state["idle_unknown"]


def test_a_neighbour_on_a_gpu_without_utilisation_counters_is_still_not_idle(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    gpu = nvml.gpu(
        0, uuid="GPU-0", utilization=None, processes=[{"pid": p, "used_mib": 1} for p in (os.getpid(), 1)]
    )
    handle = nvml.install(monkeypatch, tmp_path, nvml.state(gpu)).nvmlDeviceGetHandleByIndex(0)
    state = idle_state(handle, root=os.getpid(), sleep=Sleeps())
    assert state["idle"] is False and "1 other process(es) on the GPU (PIDs 1)" in state["why_not_idle"]
