"""Transport bisection tells a slow NCCL start from a broken transport, from the ranks' phases.

NCCL cannot run here (no GPU), so every launcher in this file is SIMULATED: it returns the outcome a
real NCCL launch would (ranks killed at the deadline in a given phase, or ranks that raised), and
records the plans it was given.
"""

from __future__ import annotations

import pytest

from envcheck.collectives import common as checks
from envcheck.collectives import failures as diagnosis
from envcheck.collectives.launch import LaunchOutcome, LaunchPlan, RankOutcome
from envcheck.core.result import Status

PLAN = LaunchPlan("nccl", 8, ("correctness",), 18.0)
GOOD = {"rank": 0, "all_reduce": {}}


def _stalled(plan: LaunchPlan, phases: list[str]) -> LaunchOutcome:
    """Every rank killed at the deadline; rank r's last phase is phases[r]."""
    order = ["started", "store", "init", "barrier", "ready", "all_reduce.float32"]
    ranks = [
        RankOutcome(
            r, -9, True, [(p, 1.0 + i) for i, p in enumerate(order[: order.index(last) + 1])], None, ""
        )
        for r, last in enumerate(phases)
    ]
    return LaunchOutcome(plan, ranks, plan.deadline_s, True)


def _ok(plan: LaunchPlan) -> LaunchOutcome:
    ranks = [
        RankOutcome(r, 0, False, [("done", 1.0)], dict(GOOD, rank=r), "") for r in range(plan.world_size)
    ]
    return LaunchOutcome(plan, ranks, 1.0, False)


@pytest.fixture(autouse=True)
def _no_fault(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ENVCHECK_TEST_FAULT", raising=False)


def test_slow_start_is_retried_unchanged_not_blamed_on_p2p() -> None:
    """8 ranks on a cold cache: two still importing torch at the deadline. The warm retry passes.

    The old code retried with NCCL_P2P_DISABLE=1 and reported 'the P2P transport is broken'.
    """
    plans: list[LaunchPlan] = []

    def launcher(plan: LaunchPlan) -> LaunchOutcome:
        plans.append(plan)
        if len(plans) == 1:
            return _stalled(plan, ["barrier"] * 6 + ["started", "started"])
        return _ok(plan)

    outcome, fixed_by, notes = checks.launch_with_bisection(PLAN, 60.0, launcher)
    assert outcome.ok and fixed_by is None
    assert [p.env for p in plans] == [(), ()], "a slow start must not disable any transport"
    assert plans[1].deadline_s > plans[0].deadline_s
    assert "slow start" in notes[0] and "ranks 6, 7 still importing torch ('started')" in notes[0]


def test_slow_start_twice_is_reported_as_a_slow_start_naming_the_phase() -> None:
    plans: list[LaunchPlan] = []

    def launcher(plan: LaunchPlan) -> LaunchOutcome:
        plans.append(plan)
        return _stalled(plan, ["barrier", "init"])

    outcome, fixed_by, notes = checks.launch_with_bisection(PLAN, 60.0, launcher)
    assert len(plans) == 2 and all(p.env == () for p in plans) and fixed_by is None
    result = checks.launch_failure(outcome, notes)
    assert result.status is Status.FAIL
    assert (
        "slow start" in result.summary
        and "rank 1 still initialising the process group ('init')" in result.summary
    )
    assert "P2P" not in result.summary + (result.remediation or "")
    assert "SHM" not in result.summary + (result.remediation or "")


def test_stall_inside_a_collective_is_bisected() -> None:
    """Every rank reached the all-reduce and stalled there: a transport problem; P2P off fixes it."""
    plans: list[LaunchPlan] = []

    def launcher(plan: LaunchPlan) -> LaunchOutcome:
        plans.append(plan)
        if dict(plan.env).get("NCCL_P2P_DISABLE") == "1":
            return _ok(plan)
        return _stalled(plan, ["all_reduce.float32"] * 2)

    outcome, fixed_by, notes = checks.launch_with_bisection(PLAN, 60.0, launcher)
    assert fixed_by == "P2P" and [dict(p.env) for p in plans] == [{}, {"NCCL_P2P_DISABLE": "1"}]


def test_slow_start_then_transport_stall_is_bisected_after_the_retry() -> None:
    plans: list[LaunchPlan] = []

    def launcher(plan: LaunchPlan) -> LaunchOutcome:
        plans.append(plan)
        if len(plans) == 1:
            return _stalled(plan, ["started", "store"])
        if dict(plan.env).get("NCCL_SHM_DISABLE") == "1":
            return _ok(plan)
        return _stalled(plan, ["barrier", "barrier"])

    outcome, fixed_by, notes = checks.launch_with_bisection(PLAN, 200.0, launcher)
    assert fixed_by == "SHM" and [dict(p.env) for p in plans][:2] == [{}, {}] and len(plans) == 4


def test_a_rank_that_raised_in_init_is_not_a_slow_start() -> None:
    outcome = _stalled(PLAN, ["init", "init"])
    outcome.ranks[0] = RankOutcome(0, 1, False, [("init", 1.0)], {"rank": 0, "error": "NCCL error"}, "")
    assert diagnosis.slow_start(outcome) == []


# pytorch/torchtitan#853: a container's 16 MB /dev/shm, 8x H100, "Error while creating shared memory segment
# /dev/shm/nccl-1YsMbG (size 7340384)"; NVIDIA/nccl#342: Docker's 64 MB default, "posix_fallocate failed: No space
# left on device", fixed by a larger /dev/shm or NCCL_SHM_DISABLE=1.
SHM_CASE = """
import json
from envcheck.collectives import common
from envcheck.collectives.launch import LaunchOutcome, LaunchPlan, RankOutcome
from envcheck.core.result import failed
plan = LaunchPlan("nccl", 8, ("correctness",), 18.0, env=(("NCCL_P2P_DISABLE", "1"), ("NCCL_SHM_DISABLE", "1")))
outcome = LaunchOutcome(plan, [RankOutcome(0, 0, False, [("done", 1.0)], {"rank": 0}, "")], 1.0, False)
first = failed("nccl ranks failed: Error while creating shared memory segment /dev/shm/nccl-1YsMbG (size 7340384)")
r = common.transport_fixed(first, "SHM", outcome)
print(json.dumps({"class": r.fault_class.value if r.fault_class else None, "code": r.code, "summary": r.summary,
                  "fix": r.remediation}))
"""


@pytest.mark.parametrize("size, fault_class, code", [("64m", "config", "shm.small"), ("2g", "node", None)])
def test_an_nccl_shm_failure_cured_by_shm_disable_in_a_small_dev_shm_is_the_containers(
    size: str, fault_class: str, code: str | None
) -> None:
    """Real: a tmpfs of Docker's default 64 MiB (and a healthy 2 GiB twin) mounted on /dev/shm in a private mount
    namespace, read by the live probe. Simulated: the NCCL launch outcome (no GPU here)."""
    import json
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) for a private /dev/shm")
    root = Path(__file__).resolve().parents[2]
    script = f'mount -t tmpfs -o size={size} envcheck-shm /dev/shm && exec {sys.executable} -c "$CASE"'
    done = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "CASE": SHM_CASE, "PYTHONPATH": str(root)},
    )
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["class"] == fault_class and got["code"] == code, got
    if fault_class == "config":
        assert "needs more than this /dev/shm of 64 MiB" in got["summary"] and "--shm-size=8g" in got["fix"]
