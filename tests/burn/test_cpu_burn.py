"""Real burns on CPU workers: one per core (more share cores in turn), one torch thread each, pinned, forked from this
process, joined by a real gloo process group for the all-reduce; the verdicts as `envcheck burn` gives them.

Faults come from outside the product: a burn hook (tests/helpers/burn_faults.py, named by ENVCHECK_BURN_HOOK) flips
bits in one worker's outputs now and then or always, makes one worker exit, or moves it into a cgroup v1 CPU quota.
Real: processes, torch, gloo, the kernel's CFS quota (root and the v1 cpu controller; skipped with the reason
otherwise). Staged: nothing; the CPU workers stand where GPUs would (the machinery is the same, see envcheck.burn).
Each burn's budget is a few seconds (the fork costs no torch import): about 60 s for the file under load.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch.distributed  # noqa: F401  # imported once here: each burn's budget then starts at its fork

from envcheck.burn.coordinator import GRACE_S, BurnRun, Coordinator
from envcheck.burn.outcome import results
from envcheck.burn.plan import make_plan
from envcheck.core.result import FaultClass, Result, Status
from tests.helpers import burn_faults, descendants
from tests.helpers.cpu_throttle import WHY_NOT, can_throttle, quota_group

# timing: the straggler verdicts, and the healthy twins' "no straggler", rest on the workers' measured throughput
pytestmark = [pytest.mark.slow, pytest.mark.timing]
LIGHT = ("matmul.float32", "reduce", "all_reduce")  # short rounds: more of them in a few seconds
ROUND_S = 1.5  # a round under this machine's load, at most


def _leftovers() -> tuple[set[int], set[str]]:
    return set(descendants(os.getpid())), {
        p.name for p in Path(tempfile.gettempdir()).glob("envcheck-burn-*")
    }


@pytest.fixture(autouse=True)
def nothing_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No worker process and no burn work folder outlives a burn (the test's own temp dir: another test's burn may
    run beside it)."""
    own = tmp_path / "tmp"
    own.mkdir()
    monkeypatch.setenv("TMPDIR", str(own))
    monkeypatch.setattr(tempfile, "tempdir", str(own))
    processes, folders = _leftovers()
    yield
    after = _leftovers()
    assert after[0] - processes == set() and after[1] - folders == set()


def burn(
    monkeypatch: pytest.MonkeyPatch, budget: float, workers: int, *faults: str, only: tuple[str, ...] = LIGHT
) -> tuple[BurnRun, dict[str, Result]]:
    for key, value in burn_faults.env(*faults).items():
        monkeypatch.setenv(key, value)
    plan = make_plan(budget, allow_cpu=True, cpu_workers=workers, only=only)
    run = Coordinator(plan).run()
    return run, {r.name: r for r in results(run)}


def test_healthy_workers_agree_bit_for_bit_and_the_budget_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    began = time.monotonic()
    run, found = burn(monkeypatch, 6.0, 2, only=())  # every workload a CPU has
    took = time.monotonic() - began
    assert found["burn.corruption"].status is Status.PASS, found["burn.corruption"].summary
    assert found["burn.accuracy"].status is Status.PASS, found["burn.accuracy"].summary
    assert found["burn.stragglers"].status is not Status.FAIL
    assert "burn.run" not in found and run.stopped_by == "budget" and run.problems == []
    assert took <= 6.0 + ROUND_S + GRACE_S, took
    sums = found["burn.corruption"].measured["checksums"]
    assert {s["workload"] for s in sums} >= {
        "matmul.float32",
        "matmul.bfloat16",
        "sdpa.float32",
        "all_reduce.float32",
    }
    figs = found["burn.stragglers"].measured["figures"]
    assert {f["kind"] for f in figs} >= {"burn.matmul.float32", "burn.conv.float32"}
    assert {f["scope"] for f in figs} == {"device"} and {f["unit"] for f in figs} <= {"GFLOP/s", "GB/s"}


def test_a_bit_flipped_now_and_then_names_that_worker_within_the_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run, found = burn(monkeypatch, 6.0, 2, "worker=1:flip:0.1")
    sdc = found["burn.corruption"]
    assert sdc.status is Status.FAIL and sdc.fault_class is FaultClass.NODE and sdc.code == "burn.sdc"
    assert sdc.summary.startswith("CPU worker 1 (core "), sdc.summary
    assert "CPU worker 0" not in sdc.summary
    assert sdc.measured["first_wrong_at_s"] <= 6.0
    assert (
        found["burn.accuracy"].status is Status.PASS
    )  # the devices that agree are right: corruption, not inaccuracy


def test_three_workers_the_majority_names_the_one_that_is_always_wrong(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run, found = burn(monkeypatch, 6.0, 3, "worker=2:stuck:0")
    sdc = found["burn.corruption"]
    assert sdc.code == "burn.sdc" and sdc.summary.startswith("CPU worker 2 "), sdc.summary
    assert "differ from its peers" in sdc.summary


def test_two_workers_stuck_outside_tolerance_the_reference_names_the_wrong_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run, found = burn(monkeypatch, 6.0, 2, "worker=1:stuck:30")
    sdc = found["burn.corruption"]
    assert sdc.code == "burn.sdc" and sdc.summary.startswith("CPU worker 1 "), sdc.summary


def test_two_workers_stuck_inside_tolerance_both_are_suspects_none_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # compute only: the all-reduce's exact result would name worker 1 (tolerance zero), as it should
    run, found = burn(monkeypatch, 6.0, 2, "worker=1:stuck:0", only=("matmul.float32", "reduce"))
    sdc = found["burn.corruption"]
    assert sdc.status is Status.FAIL and sdc.code == "burn.sdc_unresolved", sdc.summary
    assert "CPU worker 0 and CPU worker 1 disagree bit for bit" in sdc.summary


def test_one_worker_its_repeats_name_a_result_that_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    run, found = burn(monkeypatch, 6.0, 1, "worker=0:flip:0.1")
    sdc = found["burn.corruption"]
    assert sdc.status is Status.FAIL and sdc.summary.startswith("CPU worker 0 "), sdc.summary
    assert "differ from its own repeats" in sdc.summary


def test_a_worker_that_dies_is_the_burns_own_failure_never_the_node(monkeypatch: pytest.MonkeyPatch) -> None:
    began = time.monotonic()
    run, found = burn(monkeypatch, 30.0, 2, "worker=1:exit")
    assert time.monotonic() - began < 20  # the others were stopped, not left waiting in the all-reduce
    assert run.stopped_by == "worker"
    own = found["burn.run"]
    assert own.status is Status.ERROR and own.crashed and own.fault_class is None
    assert "worker 1 (cpu) exited with code 3" in own.summary
    assert not any(r.fault_class is FaultClass.NODE for r in found.values())


@pytest.mark.skipif(not can_throttle(), reason=WHY_NOT)
def test_a_worker_under_a_cpu_quota_is_a_straggler_named_with_the_quota(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 10% of a core: binding even on this shared 2-core machine, where a worker gets about 25% under load
    with quota_group("envcheck-burn", 10) as group:
        run, found = burn(monkeypatch, 8.0, 2, f"worker=1:cgroup:{group}", only=("matmul.float32", "reduce"))
    slow = found["burn.stragglers"]
    assert (
        slow.status is Status.WARN and slow.code == "burn.straggler" and slow.fault_class is FaultClass.NODE
    )
    assert slow.summary.startswith("CPU worker 1 "), slow.summary
    assert "its cgroup's CPU quota of 0.1 CPU throttled it" in slow.summary
    assert found["burn.corruption"].status is Status.PASS  # slow is not wrong


def test_a_budget_spent_before_the_workers_were_ready_is_the_burns_own_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for key in ("ENVCHECK_BURN_HOOK", burn_faults.ENV_VAR):
        monkeypatch.delenv(key, raising=False)
    plan = make_plan(
        1.0, allow_cpu=True, cpu_workers=2, only=LIGHT, began=time.monotonic() - 1.0
    )  # already over
    run = Coordinator(plan).run()
    found = {r.name: r for r in results(run)}
    assert found["burn.corruption"].status is Status.ERROR and found["burn.corruption"].fault_class is None
    # the workers fork in a tenth of a second: ready, but stopped before their first round (or, on a slower start,
    # named as still starting)
    said = " ".join(r.summary for r in found.values())
    assert (
        "the burn ended before a round finished" in said or "was still starting when the budget ended" in said
    )
    assert not any(r.fault_class is FaultClass.NODE for r in found.values())


def test_workers_stuck_joining_are_named_and_the_budget_is_still_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As a node whose NCCL init hangs: the workers (forked from this process, so they run this patched join) never
    get ready; the burn ends on time and says why, as its own failure."""
    from envcheck.burn import loop

    for key in ("ENVCHECK_BURN_HOOK", burn_faults.ENV_VAR):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr(loop, "join", lambda cfg: time.sleep(3600))
    began = time.monotonic()
    run = Coordinator(make_plan(3.0, allow_cpu=True, cpu_workers=2, only=LIGHT)).run()
    assert time.monotonic() - began < 3.0 + GRACE_S + 2
    found = {r.name: r for r in results(run)}
    own = found["burn.run"]
    assert own.status is Status.ERROR and own.fault_class is None
    assert (
        "worker 0 (cpu) was still joining the others or preparing its workloads when the budget ended"
        in own.summary
    )


def test_ctrl_c_stops_the_workers_through_their_lifeline_and_keeps_what_finished(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ctrl-C (KeyboardInterrupt in the coordinator, raised here from its progress callback once two rounds ran):
    every worker is told to stop, finishes its round and says done; the burn is judged on what finished."""
    for key in ("ENVCHECK_BURN_HOOK", burn_faults.ENV_VAR):
        monkeypatch.delenv(key, raising=False)

    def ctrl_c(tally: object, elapsed: float) -> None:
        if min((w.rounds for w in run_tally.workers.values()), default=0) >= 2:
            raise KeyboardInterrupt

    coordinator = Coordinator(make_plan(120.0, allow_cpu=True, cpu_workers=2, only=LIGHT), ctrl_c)
    run_tally = coordinator.tally
    began = time.monotonic()
    run = coordinator.run()
    assert time.monotonic() - began < 60  # long before the 120 s budget
    assert run.stopped_by == "interrupt" and isinstance(run.signal, KeyboardInterrupt)
    assert all(w.done for w in run.tally.workers.values())  # stopped by their lifeline, not killed
    found = {r.name: r for r in results(run)}
    assert found["burn.corruption"].status is Status.PASS
