"""The engine: a hung, crashing or raising check becomes ERROR, in time, and the rest still run."""

from __future__ import annotations

import dataclasses
import os
import time
import uuid
from pathlib import Path

import pytest

from envcheck.checks.hooks import HOOKS
from envcheck.core.check import CheckSpec, Context
from envcheck.core.result import Status
from envcheck.core.runner import Runner
from tests.core import fault_checks
from tests.helpers import processes_with_marker


def spec(func, timeout_s: float = 20.0) -> CheckSpec:  # type: ignore[no-untyped-def]
    return CheckSpec(f"test.{func.__name__}", func, "fault injection", timeout_s=timeout_s, group="faults")


def marked(marker: str) -> dict[str, str]:
    """The workers' environment with the marker their processes (and grandchildren) are found by."""
    return {**os.environ, "ENVCHECK_TEST_MARKER": marker}


# Timing: "in time" is measured on the wall clock, after a healthy check has paid the fork server's start and torch
# import (2.5 to 3.2 s here on a quiet machine, and about 6.5 s on a loaded one, where a bound of the timeout plus 5 s
# for both together failed): what is left is the hung check's timeout and its worker's kill (3.1 s here).
@pytest.mark.timing
def test_hung_check_becomes_error_within_timeout_and_leaves_no_orphan() -> None:
    marker = uuid.uuid4().hex
    with Runner(Context(), env=marked(marker)) as runner:
        before = runner.run_one(spec(fault_checks.healthy))
        start = time.monotonic()
        result = runner.run_one(spec(fault_checks.sleeps_forever, timeout_s=3))
        elapsed = time.monotonic() - start
        after = runner.run_one(spec(fault_checks.healthy))
    assert before.status is Status.PASS
    assert result.status is Status.ERROR
    assert "timed out after 3s" in (result.reason or "") and result.measured["worker_failure"] == "timeout"
    assert "about to hang" in result.details
    assert 3 <= elapsed < 3 * 2, elapsed
    assert not result.crashed  # a timeout is said as one, not as a crash
    assert after.status is Status.PASS
    deadline = time.monotonic() + 5
    while processes_with_marker(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_with_marker(marker) == []


def test_segfault_and_os_exit_become_error_and_later_checks_run() -> None:
    with Runner(Context()) as runner:
        results = runner.run(
            [
                spec(fault_checks.segfaults),
                spec(fault_checks.exits_hard),
                spec(fault_checks.raises),
                spec(fault_checks.healthy),
            ]
        )
    seg, hard, raised, ok = results
    assert seg.status is Status.ERROR and "SIGSEGV" in (seg.reason or "")
    assert seg.measured["worker_failure"] == "signal" and hard.measured["worker_failure"] == "exit"
    assert "about to segfault" in seg.details and "Fatal Python error" in seg.details
    assert hard.status is Status.ERROR and "exited with code 7" in (hard.reason or "")
    assert raised.status is Status.ERROR and "ValueError: boom from a check" in (raised.reason or "")
    assert "Traceback" in raised.details
    assert ok.status is Status.PASS and ok.summary == "fine"
    # envcheck's own failure is a typed flag the engine and reports read, never the summary's words
    assert seg.crashed and hard.crashed and raised.crashed and not ok.crashed


@pytest.mark.timing
def test_whole_run_timeout_caps_checks_and_marks_the_rest() -> None:
    marker = uuid.uuid4().hex
    with Runner(Context(), total_timeout_s=2, env=marked(marker)) as runner:
        start = time.monotonic()
        hung, never = runner.run([spec(fault_checks.sleeps_forever, 60), spec(fault_checks.healthy)])
        assert time.monotonic() - start < 2 + 5
    assert hung.status is Status.ERROR and "whole-run --timeout" in (hung.reason or "")
    assert never.status is Status.ERROR and "whole-run timeout" in (never.reason or "")


def test_checks_in_one_group_share_one_worker() -> None:
    with Runner(Context()) as runner:
        first, second = runner.run([spec(fault_checks.healthy), spec(fault_checks.healthy)])
    assert first.measured["pid"] == second.measured["pid"]


def test_gpu_groups_never_overlap_and_release_their_worker_while_cpu_groups_still_overlap(
    tmp_path: Path,
) -> None:
    """No GPU here: `gpu_user` stands in for a check holding a CUDA context (share_gpu=False is what a GPU
    host gets). Intervals come from CLOCK_MONOTONIC in each worker; overlap with the CPU group is proven by a
    rendezvous, not by timing."""

    def gpu(func, group: str) -> CheckSpec:  # type: ignore[no-untyped-def]
        return CheckSpec(f"test.{func.__name__}", func, "gpu", group=group, uses_gpu=True)

    specs = [
        gpu(fault_checks.gpu_user, "gpu_a"),
        gpu(fault_checks.gpu_user, "gpu_b"),
        gpu(fault_checks.gpu_user, "gpu_a"),
        gpu(fault_checks.gpu_user, "gpu_b"),
        gpu(fault_checks.gpu_meets_cpu, "gpu_a"),
        CheckSpec("test.cpu_meets_gpu", fault_checks.cpu_meets_gpu, "cpu", group="cpu", uses_gpu=False),
    ]
    with Runner(Context(), share_gpu=False, env={**os.environ, "ENVCHECK_TEST_DIR": str(tmp_path)}) as runner:
        results = runner.run(specs)
    assert all(r.status is Status.PASS for r in results), results
    by_group: dict[int, list[tuple[float, float]]] = {}
    for r in results[:4]:
        by_group.setdefault(r.measured["pid"], []).append((r.measured["start"], r.measured["end"]))
    assert len(by_group) == 2  # one worker per GPU group
    (a, b) = by_group.values()
    assert max(e for _, e in a) <= min(s for s, _ in b) or max(e for _, e in b) <= min(s for s, _ in a)
    pid_a = results[0].measured["pid"]
    assert results[1].measured["earlier_alive"] == [] and results[3].measured["earlier_alive"] == []
    assert pid_a not in results[3].measured["earlier_alive"]  # gpu_a's worker was closed before gpu_b ran
    assert results[4].measured["met"] and results[5].measured["met"]  # the CPU group overlapped a GPU group


def test_spec_uses_gpu_defaults_to_its_torch_or_cuda_needs() -> None:
    from envcheck.core.check import Needs

    assert CheckSpec("t.a", fault_checks.healthy, "x", needs=Needs(torch=True)).gpu
    assert not CheckSpec("t.b", fault_checks.healthy, "x").gpu
    assert not CheckSpec("t.c", fault_checks.healthy, "x", needs=Needs(cuda=True), uses_gpu=False).gpu


def test_a_sticky_cuda_error_recycles_the_worker_for_later_checks() -> None:
    """No GPU: the check raises the real text of cudaErrorLaunchFailure; the next check gets a fresh worker."""
    with Runner(Context(), hooks=HOOKS) as runner:
        before, sticky, after = runner.run(
            [spec(fault_checks.healthy), spec(fault_checks.sticky_cuda_error), spec(fault_checks.healthy)]
        )
    assert sticky.status is Status.ERROR and "unspecified launch failure" in (sticky.reason or "")
    assert before.measured["pid"] != after.measured["pid"]


def test_dist_checks_run_in_a_worker_of_their_own() -> None:
    """Their NCCL ranks must not meet the CUDA context the torch group's worker holds."""
    from envcheck.checks.check_registry import registry

    dist = [s for s in registry().values() if s.name.startswith("dist.")]
    assert dist and all(s.group == "distributed" and s.gpu for s in dist)


def test_facts_are_collected_beside_the_gpu_lane_in_a_worker_of_their_own(tmp_path: Path) -> None:
    """`prefetch_facts` collects while a GPU group runs (a rendezvous proves the overlap, no timing), in a
    process that is not a check's worker, and one that never initialised CUDA."""
    hooks = dataclasses.replace(HOOKS, facts=fault_checks.facts_meet_gpu)  # a function object, not a name
    gpu = CheckSpec("test.gpu_meets_facts", fault_checks.gpu_meets_facts, "gpu", group="gpu_a", uses_gpu=True)
    with Runner(
        Context(), share_gpu=False, hooks=hooks, env={**os.environ, "ENVCHECK_TEST_DIR": str(tmp_path)}
    ) as runner:
        runner.prefetch_facts()
        (result,) = runner.run([gpu])
        facts = runner.facts()
    assert result.measured["met"] and facts["met"]
    assert facts["pid"] != result.measured["pid"] and facts["cuda_initialized"] is False
