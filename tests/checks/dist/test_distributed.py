"""dist.* checks through the real engine with real gloo ranks; faults come from the test-only
ENVCHECK_TEST_FAULT variable (see tests/helpers/rank_faults.py). NCCL paths need a GPU."""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from envcheck.checks.dist import distributed_facts
from envcheck.collectives import common as checks
from envcheck.collectives.all_reduce import CPU_EXACT_COUNT
from envcheck.collectives.launch import LaunchOutcome, LaunchPlan, RankOutcome
from envcheck.collectives.shm import remove_segments, segments_mapped_by
from envcheck.collectives.sweep import busbw, gpu_sizes
from envcheck.core.result import Status, passed
from envcheck.probe.system import CommandOutput
from tests.helpers import descendants, processes_with_marker, run_check
from tests.helpers.rank_faults import CORRUPT_STRIDE, RANK_HOOK, corrupted_elements, parse_fault


@pytest.fixture
def marker(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A unique env marker every rank inherits, to find orphans afterwards."""
    value = f"envcheck-dist-test-{uuid.uuid4().hex}"
    monkeypatch.setenv("ENVCHECK_TEST_MARKER", value)
    yield value
    assert processes_with_marker(value) == [], "a rank survived the check"


@pytest.mark.parametrize("ranks", [2, 4])
def test_gloo_all_reduce_exact(ranks: int, marker: str) -> None:
    result = run_check("dist.all_reduce", cpu_ranks=ranks)
    assert result.status is Status.PASS, result.details
    assert result.measured["world_size"] == ranks
    assert result.measured["wrong_float32"] == 0
    assert result.measured["elements_float32"] == ranks * CPU_EXACT_COUNT


def test_collectives_exact(marker: str) -> None:
    result = run_check("dist.collectives", cpu_ranks=3)
    assert result.status is Status.PASS, result.details
    assert result.measured["wrong_all_gather"] == result.measured["wrong_broadcast"] == 0


def test_corrupt_rank_fails_with_wrong_count(monkeypatch: pytest.MonkeyPatch, marker: str) -> None:
    monkeypatch.setenv("ENVCHECK_TEST_FAULT", "rank=1:corrupt")
    monkeypatch.setenv("ENVCHECK_RANK_HOOK", RANK_HOOK)
    result = run_check("dist.all_reduce", cpu_ranks=2)
    assert result.status is Status.FAIL
    # every rank holds the reduced buffer, so each sees every corrupted element
    expected = 2 * corrupted_elements(CPU_EXACT_COUNT)
    assert result.measured["wrong_float32"] == expected
    assert f"#wrong {expected}" in result.summary
    assert "first wrong float32 element 0" in result.details and CORRUPT_STRIDE > 1


# The gloo ranks' own deadline (12 s) plus a worker's start-up: well inside the spec timeout, which also
# budgets NCCL transport retries.
STALL_BOUND_S = checks.CORRECTNESS_DEADLINE_S["gloo"] + 18


def test_rank_exiting_mid_collective_is_named(monkeypatch: pytest.MonkeyPatch, marker: str) -> None:
    monkeypatch.setenv("ENVCHECK_TEST_FAULT", "rank=1:exit")
    monkeypatch.setenv("ENVCHECK_RANK_HOOK", RANK_HOOK)
    began = time.monotonic()
    result = run_check("dist.all_reduce", cpu_ranks=2)
    assert time.monotonic() - began < STALL_BOUND_S
    assert result.status is Status.FAIL
    assert result.summary.index("rank 1 exited with code 3") < result.summary.index("rank 0")


def test_hanging_rank_is_killed_and_named(monkeypatch: pytest.MonkeyPatch, marker: str) -> None:
    monkeypatch.setenv("ENVCHECK_TEST_FAULT", "rank=1:hang")
    monkeypatch.setenv("ENVCHECK_RANK_HOOK", RANK_HOOK)
    # processes this session already had (another test file's session fixtures, e.g. Slurm's daemons) are not ours
    before = set(descendants(os.getpid()))
    began = time.monotonic()
    result = run_check("dist.all_reduce", cpu_ranks=3)
    assert time.monotonic() - began < STALL_BOUND_S
    assert result.status is Status.FAIL, result.summary
    assert "rank 1 stalled after 'ready'" in result.summary
    assert "all_reduce.float32" in result.summary
    assert [pid for pid in descendants(os.getpid()) if pid not in before] == []


def test_port_29500_taken_does_not_matter(monkeypatch: pytest.MonkeyPatch, marker: str) -> None:
    """A real listener holds the default port, and the environment even points at it."""
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "29500")
    with socket.socket() as busy:
        busy.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            busy.bind(("127.0.0.1", 29500))
        except OSError:
            pass  # someone else already holds it: same situation
        busy.listen()
        result = run_check("dist.all_reduce", cpu_ranks=2)
    assert result.status is Status.PASS, result.details


def test_busbw_sweep_and_floor(marker: str) -> None:
    result = run_check("dist.busbw", cpu_ranks=2, min_busbw_gbps=1e6)
    assert result.status is Status.WARN
    rows = result.measured["rows"]
    assert [r["bytes"] for r in rows] == sorted(r["bytes"] for r in rows) and len(rows) >= 4
    assert all(r["wrong"] == 0 and r["busbw_gbps"] == pytest.approx(r["algbw_gbps"], rel=0.01) for r in rows)
    assert "below the 1e+06 GB/s floor" in result.summary
    strict = run_check("dist.busbw", cpu_ranks=2, min_busbw_gbps=1e6, strict_perf=True)
    assert strict.status is Status.FAIL
    # a floor missed is its own finding (soft: --for health drains on it only after it repeats, cluster.severity);
    # a #wrong in the sweep stays dist.busbw.fail (hard)
    assert result.code == strict.code == "perf.busbw_low"


def test_busbw_formula() -> None:
    assert busbw(10.0, 1) == 0.0
    assert busbw(10.0, 2) == 10.0
    assert busbw(10.0, 8) == pytest.approx(17.5)
    with pytest.raises(ValueError):
        busbw(1.0, 0)


def test_gpu_sizes_reach_256_mib() -> None:
    sizes = gpu_sizes(80 * 2**30, 0.1)
    assert sizes[0] == 2**20 and sizes[-1] >= 256 * 2**20 and sizes[-1] <= 2**30


def test_bad_fault_spec_is_rejected() -> None:
    with pytest.raises(ValueError, match="rank=N"):
        parse_fault("rank=x:explode")


def test_bad_cpu_ranks_is_an_error() -> None:
    result = run_check("dist.all_reduce", isolated=False, cpu_ranks=0)
    assert result.status is Status.ERROR and "--cpu-ranks" in (result.reason or "")


def test_leftover_nccl_segments_are_found_and_removed(tmp_path: Path) -> None:
    """A real process maps a real /dev/shm file named like NCCL's; we find it by PID and unlink it."""
    import mmap
    import subprocess
    import sys

    path = Path("/dev/shm") / f"nccl-envcheck-test-{uuid.uuid4().hex[:8]}"
    path.write_bytes(b"\0" * 4096)
    code = "import mmap,sys,time; f=open(sys.argv[1],'r+b'); m=mmap.mmap(f.fileno(),4096); print(1,flush=True); time.sleep(60)"
    child = subprocess.Popen([sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline()
        assert segments_mapped_by(child.pid) == {str(path)}
    finally:
        child.kill()
        child.wait(timeout=10)
    assert remove_segments({str(path)}) == [str(path)] and not path.exists()
    assert mmap.PAGESIZE > 0


def test_facts_say_why_values_are_absent() -> None:
    facts = distributed_facts(run=lambda argv, timeout: CommandOutput(0, "GPU0\tX\n", ""))
    assert facts["nvidia_topology"] == "GPU0\tX"
    import torch

    if not torch.cuda.is_available():
        assert "absent" in facts["p2p_matrix"]
    assert facts["backends"]["gloo"] is True


@pytest.mark.gpu
def test_nccl_all_reduce_on_gpus() -> None:
    result = run_check("dist.all_reduce", allow_cpu=False)
    assert result.status is Status.PASS, result.details
    assert result.measured["backend"] == "nccl"


@pytest.mark.gpu
def test_nccl_busbw_on_gpus() -> None:
    result = run_check("dist.busbw", allow_cpu=False)
    assert result.status is Status.PASS, result.details
    assert result.measured["rows"][-1]["bytes"] >= 256 * 2**20


def _fake_nccl_outcome(plan: LaunchPlan, ok: bool) -> LaunchOutcome:
    found = {"rank": 0, "all_reduce": {}} if ok else {"rank": 0, "error": "RuntimeError: NCCL error"}
    rank = RankOutcome(0, 0 if ok else 1, False, [("ready", 0.0)], found, "NCCL INFO Channel 00 : 0[0] -> 1[1] via P2P")
    return LaunchOutcome(plan, [rank], 1.0, False)


def test_transport_bisection_names_the_broken_transport(monkeypatch: pytest.MonkeyPatch) -> None:
    """NCCL cannot run here (no GPU), so the launcher is simulated: it fails unless P2P is disabled."""
    monkeypatch.delenv("ENVCHECK_TEST_FAULT", raising=False)
    tried: list[dict[str, str]] = []

    def launcher(plan: LaunchPlan) -> LaunchOutcome:
        tried.append(dict(plan.env))
        return _fake_nccl_outcome(plan, ok=dict(plan.env).get("NCCL_P2P_DISABLE") == "1")

    plan = LaunchPlan("nccl", 2, ("correctness",), 10.0)
    outcome, fixed_by, notes = checks.launch_with_bisection(plan, 60.0, launcher)
    assert fixed_by == "P2P" and outcome.ok and tried == [{}, {"NCCL_P2P_DISABLE": "1"}]
    result = checks.transport_fixed(passed("fine"), "P2P", outcome)
    assert result.status is Status.FAIL and "P2P transport is broken" in result.summary
    assert "NCCL_P2P_DISABLE=1" in (result.remediation or "")


def test_bisection_stops_when_budget_is_spent(monkeypatch: pytest.MonkeyPatch) -> None:
    """Simulated NCCL launcher (no GPU here) that always fails; no time left means no retries."""
    monkeypatch.delenv("ENVCHECK_TEST_FAULT", raising=False)
    plan = LaunchPlan("nccl", 2, ("correctness",), 10.0)
    outcome, fixed_by, notes = checks.launch_with_bisection(plan, 1.0, lambda p: _fake_nccl_outcome(p, False))
    assert fixed_by is None and not outcome.ok and "not tried" in notes[0]
    failure = checks.launch_failure(outcome, notes)
    assert failure.status is Status.FAIL and "rank 0 exited with code 1" in failure.summary
    assert "--ipc=host" in (failure.remediation or "") and "via P2P" in failure.details


def test_all_reduce_sweep_api_for_bench(marker: str) -> None:
    from envcheck.checks.dist import all_reduce_sweep

    rows = all_reduce_sweep("gloo", 2, [4096, 65536], timeout_s=60.0)
    assert [r["bytes"] for r in rows] == [4096, 65536]
    assert all(r["wrong"] == 0 and r["time_s"] > 0 and r["busbw_gbps"] > 0 for r in rows)
