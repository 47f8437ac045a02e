"""The burn's sampler on the GPU path and the CPU path: NVML read through the one budgeted reader, by the UUID each
worker reports (clocks, temperature, power, clock-event reasons); a CPU worker's share of a core from /proc. The
samples feed the straggler's reasons as a GPU burn would.

Staged: NVML (tests/staging/pynvml_stub, the one NVML fake: no driver exists here), answering per GPU as nvml.h's
calls do. Real: the sampler thread, probe.nvml's budgeted reader, /proc of this process. About 1 s.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from envcheck.burn.sampler import Sampler
from envcheck.burn.stragglers import reasons
from envcheck.probe.nvml_fields import HW_THERMAL, SW_POWER_CAP
from tests.staging.nvml import gpu, install, state

HOT = {"clock_events": HW_THERMAL | SW_POWER_CAP, "sm_clock_mhz": 1410, "temperature_c": 91, "power_w": 690.0}
COOL = {"clock_events": 0, "sm_clock_mhz": 1980, "temperature_c": 61, "power_w": 700.0}


def sample(sampler: Sampler, seconds: float = 0.4) -> list[dict[str, object]]:
    sampler.start()
    time.sleep(seconds)
    sampler.stop()
    return sampler.rows


def test_each_gpu_is_sampled_by_its_uuid_and_a_hot_one_is_named_with_its_reason(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    install(monkeypatch, tmp_path, state(gpu(0, uuid="GPU-aaaa", **COOL), gpu(1, uuid="GPU-bbbb", **HOT)))
    sampler = Sampler(time.monotonic(), period_s=0.05)
    sampler.watch(0, {"kind": "cuda", "uuid": "GPU-aaaa"})
    sampler.watch(1, {"kind": "cuda", "uuid": "GPU-bbbb"})
    rows = sample(sampler)
    assert sampler.gpu_absent is None
    hot = [r for r in rows if r["worker"] == 1]
    cool = [r for r in rows if r["worker"] == 0]
    assert hot and cool
    assert hot[0] | {"at": 0} == {
        "at": 0,
        "worker": 1,
        "sm_clock_mhz": 1410.0,
        "mem_clock_mhz": 2619.0,
        "temperature_c": 91.0,
        "power_w": 690.0,
        "clock_events": float(HW_THERMAL | SW_POWER_CAP),
    }
    assert reasons(hot, cool) == [
        "HW thermal slowdown in 100% of samples",
        "SW power cap in 100% of samples",
        "up to 91 C",
        "SM clock 1410 MHz against 1980 MHz on its peers",
    ]
    assert reasons(cool, hot) == []  # the healthy twin: nothing held it back


def test_nvml_that_cannot_start_stops_the_gpu_samples_and_says_why(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    install(monkeypatch, tmp_path, state(gpu(0, uuid="GPU-aaaa"), init={"nvml_error": 9}))
    sampler = Sampler(time.monotonic(), period_s=0.05)
    sampler.watch(0, {"kind": "cuda", "uuid": "GPU-aaaa"})
    assert sample(sampler) == []
    assert sampler.gpu_absent == "NVML could not start: Driver Not Loaded"


def test_a_cpu_worker_is_sampled_from_proc() -> None:
    sampler = Sampler(time.monotonic(), period_s=0.1)
    sampler.watch(0, {"kind": "cpu", "pid": os.getpid()})
    sampler.start()
    began = time.monotonic()
    while time.monotonic() - began < 0.6:  # keep this process on its core
        sum(range(1000))
    sampler.stop()
    assert sampler.rows, "no sample"
    for row in sampler.rows:
        assert row["worker"] == 0 and "throttled_share" in row  # 0 unless a CI container has a CPU quota
        assert 0.0 < float(row["cpu_share"]) <= 1.5  # a share of one core, as /proc counts it
