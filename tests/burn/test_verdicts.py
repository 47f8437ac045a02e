"""The burn's pure parts: the digest (exact, every single bit counts), the tally of worker records, bit-for-bit
comparison (majority, repeats, the float64 reference, the undecidable pair), accuracy, and stragglers with the reasons
their samples give (NVML's clock-event bits as nvml.h numbers them; a CPU quota). Nothing is staged: the records are
what envcheck.burn.loop writes, built here by hand. About 2 s (torch's import)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch

from envcheck.burn import corruption, outcome, stragglers
from envcheck.burn.records import BadRecord, Tally
from envcheck.burn.workload import digest, relative_error
from envcheck.core.result import Status
from envcheck.probe.nvml_fields import HW_THERMAL, SW_POWER_CAP

TOL = {"matmul.float32": 1e-4}
GOOD, FLIPPED, STUCK = "a" * 32, "b" * 32, "c" * 32
CPU = "AMD EPYC"  # a CPU worker's model


def tally(workers: int, model: str = "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs)") -> Tally:
    t = Tally(began=0.0, bucket_s=1.0)
    for i in range(workers):
        t.take(
            i,
            json.dumps(
                {"type": "hello", "kind": "cpu" if model == CPU else "cuda", "index": i, "model": model}
            ),
        )
        t.take(i, json.dumps({"type": "ready", "workloads": ["matmul.float32"], "skipped": {}, "at": 1.0}))
    return t


def result(
    t: Tally,
    worker: int,
    rnd: int,
    digests: dict[str, int],
    errors: dict[str, float] | None = None,
    seconds: float = 1.0,
    at: float | None = None,
    work: float = 1e12,
    cpu: float | None = None,
) -> None:
    t.take(
        worker,
        json.dumps(
            {
                "type": "result",
                "w": "matmul.float32",
                "r": rnd,
                "s": rnd % 3,
                "n": sum(digests.values()),
                "t": seconds,
                "c": cpu,
                "work": work,
                "d": digests,
                "e": errors or {},
                "at": rnd + 2.0 if at is None else at,
            }
        ),
    )


def rounds(
    t: Tally,
    worker: int,
    count: int,
    odd: dict[int, str] | None = None,
    seconds: float = 1.0,
    cpu: float | None = None,
) -> None:
    """`count` rounds of worker: the good digest of each seed, except rounds in `odd` (round -> digest)."""
    for r in range(count):
        dig = (odd or {}).get(r, f"{r % 3}" + GOOD[1:])
        result(t, worker, r, {dig: 1}, {dig: 1e-7 if dig[0] != "f" else 0.5}, seconds, cpu=cpu)


def test_one_flipped_bit_anywhere_changes_the_digest_and_equal_bits_give_equal_digests() -> None:
    x = torch.randn(64, 300)
    base = digest(x)
    assert digest(x.clone()) == base
    flat = x.view(-1).view(torch.uint8)
    for place in (0, 1, 5_000, flat.numel() - 1):
        for bit in (0, 7):
            y = x.clone()
            y.view(-1).view(torch.uint8)[place] ^= 1 << bit
            assert digest(y) != base, (place, bit)
    assert digest(x.to(torch.bfloat16)) != digest(x.to(torch.float16))
    assert len(base) == 32


def test_relative_error_is_zero_for_exact_and_inf_for_a_nan() -> None:
    ref = torch.arange(10, dtype=torch.float64)
    assert relative_error(ref.float(), ref) == 0.0
    bad = ref.float().clone()
    bad[3] = float("nan")
    assert relative_error(bad, ref) == float("inf")


def test_a_line_that_is_not_a_record_is_envchecks_own_failure() -> None:
    t = tally(1)
    with pytest.raises(BadRecord, match="not JSON"):
        t.take(0, "Traceback (most recent call last):")
    with pytest.raises(BadRecord, match="malformed result"):
        t.take(0, json.dumps({"type": "result", "w": "matmul.float32"}))


def test_three_gpus_the_odd_one_out_is_named_against_its_peers() -> None:
    t = tally(3)
    rounds(t, 0, 9)
    rounds(t, 1, 9)
    rounds(t, 2, 9, odd={4: "1" + FLIPPED[1:]})  # one wrong result in round 4 (seed 1)
    v = corruption.judge(t, TOL)
    assert v.wrong_workers() == [2]
    (wrong,) = v.wrong
    assert (wrong.workload, wrong.seed, wrong.first_round, wrong.against) == ("matmul.float32", 1, 4, "peers")
    assert not v.unresolved and not v.inaccurate


def test_three_gpus_a_persistent_fault_is_named_by_the_majority() -> None:
    t = tally(3)
    rounds(t, 0, 6)
    rounds(t, 1, 6)
    rounds(t, 2, 6, odd={r: f"{r % 3}" + STUCK[1:] for r in range(6)})  # always the same wrong bits
    v = corruption.judge(t, TOL)
    assert v.wrong_workers() == [2] and sum(w.count for w in v.wrong) == 6


def test_the_healthy_twin_three_gpus_that_agree_name_nobody() -> None:
    t = tally(3)
    for i in range(3):
        rounds(t, i, 9)
    v = corruption.judge(t, TOL)
    assert v.wrong == [] and v.unresolved == [] and v.inaccurate == []
    assert set(v.checksums) == {("NVIDIA H100 80GB HBM3 (sm_90, 132 SMs)", "matmul.float32")}
    assert v.checksums[("NVIDIA H100 80GB HBM3 (sm_90, 132 SMs)", "matmul.float32")][1] == 3  # seeds covered


def test_two_gpus_now_and_then_the_repeat_names_the_one_that_changed() -> None:
    t = tally(2)
    rounds(t, 0, 9)
    rounds(t, 1, 9, odd={7: "1" + FLIPPED[1:]})
    v = corruption.judge(t, TOL)
    assert v.wrong_workers() == [1]


def test_two_gpus_a_persistent_disagreement_is_settled_by_the_float64_reference() -> None:
    t = tally(2)
    rounds(t, 0, 6)
    rounds(t, 1, 6, odd={r: f"f{r % 3}" + STUCK[2:] for r in range(6)})  # an exponent bit: error 0.5
    v = corruption.judge(t, TOL)
    assert v.wrong_workers() == [1] and not v.unresolved


def test_two_gpus_that_disagree_within_tolerance_are_both_suspects_and_neither_is_named() -> None:
    t = tally(2)
    rounds(t, 0, 6)
    rounds(
        t, 1, 6, odd={r: f"{r % 3}" + STUCK[1:] for r in range(6)}
    )  # a last-place difference: in tolerance
    v = corruption.judge(t, TOL)
    assert v.wrong == [] and {d.workers for d in v.unresolved} == {(0, 1)}


def test_one_gpu_its_own_repeats_name_a_result_that_changed() -> None:
    t = tally(1)
    rounds(t, 0, 9, odd={5: "2" + FLIPPED[1:]})
    v = corruption.judge(t, TOL)
    assert v.wrong_workers() == [0] and v.wrong[0].against == "repeats"


def test_models_are_never_compared_with_each_other() -> None:
    t = tally(2)
    t.take(
        2, json.dumps({"type": "hello", "kind": "cuda", "index": 2, "name": "A100", "model": "A100 (sm_80)"})
    )
    t.take(2, json.dumps({"type": "ready", "workloads": ["matmul.float32"], "skipped": {}}))
    rounds(t, 0, 6)
    rounds(t, 1, 6)
    rounds(t, 2, 6, odd={r: f"{r % 3}" + STUCK[1:] for r in range(6)})  # other bits: another model's kernels
    v = corruption.judge(t, TOL)
    assert v.wrong == [] and v.unresolved == [] and len(v.checksums) == 2


def test_every_gpu_agreeing_outside_tolerance_is_inaccuracy_not_corruption() -> None:
    t = tally(3)
    for i in range(3):
        for r in range(3):
            result(t, i, r, {f"{r}" + GOOD[1:]: 1}, {f"{r}" + GOOD[1:]: 0.2})
    v = corruption.judge(t, TOL)
    assert v.wrong == [] and len(v.inaccurate) == 3 and v.inaccurate[0].error == 0.2


def samples(worker: int, n: int, **row: Any) -> list[dict[str, Any]]:
    return [{"at": float(k), "worker": worker, **row} for k in range(n)]


def test_a_slow_gpu_is_named_with_the_clock_event_reason_its_samples_give() -> None:
    t = tally(3)
    rounds(t, 0, 6)
    rounds(t, 1, 6)
    rounds(t, 2, 6, seconds=1.5)  # a third slower
    rows = samples(0, 10, sm_clock_mhz=1980, clock_events=0, temperature_c=60)
    rows += samples(1, 10, sm_clock_mhz=1980, clock_events=0, temperature_c=61)
    rows += samples(2, 10, sm_clock_mhz=1410, clock_events=HW_THERMAL | SW_POWER_CAP, temperature_c=91)
    (slow,) = stragglers.judge(t, rows, corruption.models(t), margin_pct=10)
    assert slow.worker == 2 and slow.deficit_pct == pytest.approx(33.3, abs=0.1) and not slow.far
    assert "HW thermal slowdown in 100% of samples" in slow.reasons
    assert "up to 91 C" in slow.reasons
    assert "SM clock 1410 MHz against 1980 MHz on its peers" in slow.reasons


def test_the_healthy_twin_gpus_within_the_margin_and_too_few_calls_name_nobody() -> None:
    t = tally(2)
    rounds(t, 0, 6)
    rounds(t, 1, 6, seconds=1.05)  # 5% slower: inside the 10% margin
    assert stragglers.judge(t, [], corruption.models(t), margin_pct=10) == []
    short = tally(2)
    rounds(short, 0, 2)
    rounds(short, 1, 2, seconds=3.0)  # two calls each: too little measured to compare
    assert stragglers.judge(short, [], corruption.models(short), margin_pct=10) == []


def test_a_device_too_slow_to_make_three_calls_is_judged_against_peers_that_did() -> None:
    """The rounds are in lockstep, so a device whose one call outlasts a round's share holds every device to the rounds
    it manages: a CPU worker under a 10% quota made one call a round, two in an 8 s burn on a 2-core machine, while its
    peer made dozens in the same two rounds. The peer's calls are the reference, the slow device's own calls its speed,
    and its quota the reason it is named. Leaving both out of the comparison (two rounds each) passed it as "within
    10% of the node's best"."""
    t = tally(2, model=CPU)
    # twenty calls a round at 40 TFLOP/s against one at 1 TFLOP/s; per second of its own CPU time the throttled
    # worker is as fast as its peer
    for rnd in range(2):
        result(t, 0, rnd, {f"{rnd % 3}" + GOOD[1:]: 20}, seconds=0.5, cpu=0.5)
        result(t, 1, rnd, {f"{rnd % 3}" + GOOD[1:]: 1}, seconds=1.0, cpu=0.025)
    rows = samples(0, 10, cpu_share=0.99, throttled_share=0.0)
    rows += samples(1, 10, cpu_share=0.10, throttled_share=0.88, quota_cpus=0.1)
    (slow,) = stragglers.judge(t, rows, corruption.models(t))
    assert slow.worker == 1 and slow.deficit_pct == pytest.approx(97.5, abs=0.1) and slow.excused is None
    assert "its cgroup's CPU quota of 0.1 CPU throttled it 88% of the time" in slow.reasons


def test_the_healthy_twin_one_call_with_its_warm_up_and_no_reason_is_not_named() -> None:
    """A one-round burn: the same 1 s call, plus 0.2 s of first-call cost, three times on one device and once on the
    other. 11% below on one call, with nothing in its samples to say why, is not a finding."""
    t = tally(2)
    result(t, 0, 0, {GOOD: 3}, seconds=3.2)
    result(t, 1, 0, {GOOD: 1}, seconds=1.2)
    assert stragglers.judge(t, [], corruption.models(t), margin_pct=10) == []
    said = outcome.straggler_result(t, [], [], 10.0, None).summary
    assert said.startswith("1 device(s) within 10%") and said.endswith(
        "too few calls to judge against their peers (fewer than 3 of every workload): GPU 1"
    ), said


def test_devices_that_all_made_too_few_calls_are_said_to_be_uncompared_not_within_the_margin() -> None:
    short = tally(2)
    rounds(short, 0, 2)
    rounds(short, 1, 2, seconds=3.0)
    result = outcome.straggler_result(short, [], [], 10.0, None)
    said = result.summary
    assert result.status is Status.PASS, said
    assert said.startswith("no device compared: too few calls to judge"), said
    assert said.endswith("(fewer than 3 of every workload): GPU 0, GPU 1"), said
    assert result.measured["too_few_calls"] == [0, 1]


def test_a_cpu_worker_held_by_its_cgroup_quota_is_named_with_it() -> None:
    t = tally(2, model=CPU)
    rounds(t, 0, 6)
    rounds(t, 1, 6, seconds=3.0)
    rows = samples(0, 10, cpu_share=0.99, throttled_share=0.0)
    rows += samples(1, 10, cpu_share=0.30, throttled_share=0.7, quota_cpus=0.3)
    (slow,) = stragglers.judge(t, rows, corruption.models(t))
    assert slow.worker == 1
    assert slow.reasons == [
        "its cgroup's CPU quota of 0.3 CPU throttled it 70% of the time",
        "it got 30% of a core against 99% for its peers",
    ]


def test_a_cpu_worker_that_only_got_less_of_its_core_is_excused_not_named() -> None:
    """Other processes took part of core 1: per second of its own CPU time it is as fast as its peer, and no quota
    held it. The healthy twin of the quota case: the host's load is not the core's fault."""
    t = tally(2, model=CPU)
    rounds(t, 0, 6, seconds=1.0, cpu=0.95)
    rounds(t, 1, 6, seconds=1.5, cpu=0.95)
    rows = samples(0, 10, cpu_share=0.95, throttled_share=0.0)
    rows += samples(1, 10, cpu_share=0.63, throttled_share=0.0)
    (slow,) = stragglers.judge(t, rows, corruption.models(t))
    assert slow.worker == 1 and slow.excused == "it got 63% of a core against 95% for its peers"
    quota = tally(2, model=CPU)  # the same slowness from the worker's own cgroup quota is named
    rounds(quota, 0, 6, seconds=1.0, cpu=0.95)
    rounds(quota, 1, 6, seconds=1.5, cpu=0.95)
    rows = samples(0, 10, cpu_share=0.95, throttled_share=0.0)
    rows += samples(1, 10, cpu_share=0.63, throttled_share=0.3, quota_cpus=0.65)
    (named,) = stragglers.judge(quota, rows, corruption.models(quota))
    assert named.excused is None


def test_against_the_fleet_a_gpu_outside_the_baseline_warns_and_far_outside_fails() -> None:
    t = tally(1)
    rounds(t, 0, 6, seconds=1.1)  # 1e12 FLOP per second / 1.1: 0.909 TFLOP/s
    line = stragglers.FleetLine(median=1.0, mad=0.01, unit="TFLOP/s")
    scale = {"matmul.float32": 1e-12}
    (near,) = stragglers.judge(t, [], corruption.models(t), fleet={"burn.matmul.float32": line}, scale=scale)
    assert not near.far and "9.1% below the fleet's median 1" in near.how[0]
    (far,) = stragglers.judge(
        t, [], corruption.models(t), fleet={"burn.matmul.float32": line}, scale=scale, far_pct=5
    )
    assert far.far
    healthy = stragglers.FleetLine(median=0.91, mad=0.01, unit="TFLOP/s")
    assert (
        stragglers.judge(t, [], corruption.models(t), fleet={"burn.matmul.float32": healthy}, scale=scale)
        == []
    )


def test_a_slow_gpu_is_never_excused_by_its_cpu_time() -> None:
    """A GPU worker's CPU time (spinning or sleeping in a synchronize) says nothing of its GPU: no excuse for it."""
    t = tally(2)
    rounds(t, 0, 6, seconds=1.0, cpu=0.95)
    rounds(t, 1, 6, seconds=1.5, cpu=0.95)
    (slow,) = stragglers.judge(t, [], corruption.models(t))
    assert slow.worker == 1 and slow.excused is None


def test_float32_agreed_outside_tolerance_names_the_tf32_override_that_asks_for_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """NGC's images set TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 (reference/matmul_precision.py): every GPU then agrees on
    a float32 matmul with TF32's error. The accuracy verdict says which variable asked for it; its twin without the
    variable keeps the general fix."""
    from envcheck.burn.outcome import INACCURATE_FIX, accuracy_result

    t = tally(2)
    for i in range(2):
        for r in range(3):
            result(t, i, r, {f"{r}" + GOOD[1:]: 1}, {f"{r}" + GOOD[1:]: 3e-3})
    verdict = corruption.judge(t, TOL)
    monkeypatch.setenv("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "1")
    found = accuracy_result(t, verdict, TOL)
    assert (
        found.code == "burn.inaccurate"
        and found.fault_class is not None
        and found.fault_class.value == "image"
    )
    assert "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 in the environment makes float32 run as TF32" in found.summary
    assert (
        found.remediation == "unset TORCH_ALLOW_TF32_CUBLAS_OVERRIDE (the image sets it) to burn true float32"
    )
    monkeypatch.delenv("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE")
    assert accuracy_result(t, verdict, TOL).remediation == INACCURATE_FIX
