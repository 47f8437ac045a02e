"""No flapping (envcheck.cluster.streaks, envcheck.cluster.severity): soft findings drain after N runs in a row, hard
ones at once, resumes wait for M clean runs. Real: the streak logic, the state file on disk, the exit policy and the
health mode (envcheck.app.cluster_mode.Health); staged: the results (the real Slurm run is tests/cluster/test_slurm_flapping.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from envcheck.app.cluster_mode import Mode
from envcheck.cluster.severity import HARD, SEVERITY, SOFT, all_soft, severity
from envcheck.cluster.streaks import Policy, State, apply, hold, is_hard, is_soft, load, save, state_path
from envcheck.core.result import Result, Status, failed, passed, warned
from envcheck.perf.relative import judge
from tests.helpers import request_of, run_cli

SLOW = warned(
    "all_reduce busbw peak 0.06 GB/s, below the 0.25 GB/s floor", fault_class="node", code="perf.busbw_low"
).named("dist.busbw", 1.0)
FAST = passed("all_reduce busbw peak 1.4 GB/s").named("dist.busbw", 1.0)
LOST = failed("1 GPU(s) expected, none visible", fault_class="node", code="gpu.lost").named(
    "cuda.available", 0.1
)
OTHER = passed("/dev/shm 64 GiB").named("container.shm", 0.1)


def run_seq(
    runs: list[list[Result]], policy: Policy | None = None
) -> list[tuple[list[Status], bool, str | None]]:
    policy = policy or Policy()
    state, out = State(), []
    for n, results in enumerate(runs):
        held = hold(results, state, policy, float(n))
        state = held.state
        out.append(([r.status for r in held.results], held.clean, held.resume_hold))
    return out


def test_a_soft_finding_that_comes_and_goes_never_drains_and_one_that_stays_drains_on_the_third_run() -> None:
    seq = run_seq([[SLOW], [SLOW], [FAST], [SLOW], [SLOW], [SLOW]])
    assert [s for s, _, _ in seq] == [
        [Status.WARN],
        [Status.WARN],
        [Status.PASS],
        [Status.WARN],
        [Status.WARN],
        [Status.FAIL],
    ]
    state = State()
    for n, results in enumerate([[SLOW], [SLOW], [FAST]]):
        held = hold(results, state, Policy(), float(n))
        state = held.state
    assert held.notes == ["perf.busbw_low is gone after 2 run(s) in a row: its streak starts again"]


def test_the_summary_says_where_the_streak_stands() -> None:
    first = hold([SLOW], State(), Policy(), 0.0)
    assert first.results[0].summary.endswith("(soft: 1 of 3 health runs in a row before a drain)")
    third = hold([SLOW], State({"perf.busbw_low": {"check": "dist.busbw", "runs": 2}}, 0, 2), Policy(), 2.0)
    assert third.results[0].status is Status.FAIL and third.results[0].summary.endswith(
        "(in 3 health runs in a row)"
    )
    assert third.results[0].code == "perf.busbw_low" and third.state.soft["perf.busbw_low"]["first"] == 2.0


def test_a_run_without_the_findings_check_neither_extends_nor_resets_its_streak() -> None:
    seq = run_seq([[SLOW], [OTHER], [SLOW], [SLOW]])
    assert [s for s, _, _ in seq] == [[Status.WARN], [Status.PASS], [Status.WARN], [Status.FAIL]]


def test_a_hard_finding_drains_at_once_and_a_strict_soft_failure_waits() -> None:
    assert run_seq([[LOST]])[0] == ([Status.FAIL], False, "clean run 0 of 2 before a resume")
    strict = failed("below the floor", fault_class="node", code="perf.busbw_low").named("dist.busbw", 1.0)
    assert run_seq([[strict]])[0][0] == [Status.WARN]
    assert run_seq([[strict]], Policy(drain_after=1))[0][0] == [Status.FAIL]


def test_a_resume_waits_for_m_clean_runs_in_a_row() -> None:
    seq = run_seq([[LOST], [FAST], [SLOW], [FAST], [FAST]])
    assert [(clean, wait) for _, clean, wait in seq] == [
        (False, "clean run 0 of 2 before a resume"),
        (True, "clean run 1 of 2 before a resume"),
        (False, "clean run 0 of 2 before a resume"),
        (True, "clean run 1 of 2 before a resume"),
        (True, None),
    ]
    assert run_seq([[LOST], [FAST]], Policy(resume_after=1))[1][2] is None


def test_which_findings_are_hard_or_soft_is_data_keyed_by_code() -> None:
    assert severity("gpu.lost") is HARD and severity("xid.79") is HARD and severity("xid.13.repeated") is HARD
    assert severity("dcgm.diag.gpu_memory") is HARD and severity("cuda.error.802") is HARD
    assert severity("perf.matmul_slow") is SOFT and severity("perf.busbw_low") is SOFT
    assert severity("runtime.nofile_low") is None and severity(None) is None
    assert all(v in (HARD, SOFT) for v in SEVERITY.values())
    assert all_soft(["perf.matmul_slow", "perf.peer_slow"]) and not all_soft(
        ["perf.matmul_slow", "gpu.health"]
    )
    assert not all_soft(["something.new"]) and not all_soft([])


def test_a_relative_verdict_is_soft_and_gpu_health_with_a_lost_gpu_is_hard() -> None:
    figures = [
        {
            "kind": "matmul.bfloat16",
            "scope": "gpu",
            "subject": str(i),
            "device_label": f"GPU {i}",
            "value": 800.0 if i else 500.0,
            "unit": "TFLOP/s",
            "better": "higher",
        }
        for i in range(4)
    ]
    relative = judge(figures, strict=True).named("perf.relative", 1.0)
    assert relative.status is Status.FAIL and is_soft(relative) and not is_hard(relative)
    health = failed(
        "GPU 0: fell off the bus",
        fault_class="node",
        code="gpu.lost",
        measured={"codes": ["gpu.lost", "xid.79"]},
    ).named("gpu.health", 1.0)
    assert is_hard(health) and not is_soft(health)
    mixed = warned(
        "x",
        fault_class="node",
        code="perf.matmul_slow",
        measured={"codes": ["perf.matmul_slow", "gpu.health"]},
    )
    assert not is_soft(mixed)  # a hard code among its findings: not a soft finding
    image = warned("x", fault_class="image", code="perf.matmul_slow")
    assert not is_soft(image)  # only node findings count


def test_the_state_file_is_replaced_atomically_and_a_bad_one_starts_afresh(tmp_path: Path) -> None:
    env = {"ENVCHECK_SLURM_STATE": str(tmp_path / "slurm-prolog.json")}
    path = state_path(env)
    assert path == tmp_path / "health-streaks.json"
    held = apply([SLOW], env, Policy(), now=5.0)
    assert held.problems == [] and sorted(p.name for p in tmp_path.iterdir()) == ["health-streaks.json"]
    data = json.loads(path.read_text())
    assert data["soft"]["perf.busbw_low"]["runs"] == 1 and data["clean_runs"] == 0 and data["runs"] == 1
    assert apply([SLOW], env, Policy(), now=6.0).state.soft["perf.busbw_low"]["runs"] == 2
    path.write_text('{"version": 1, "soft": [], "clean_runs": 0, "runs": 0}')
    fresh = apply([SLOW], env, Policy())
    assert fresh.notes[0].startswith(f"health streaks in {path} unreadable (its soft findings are malformed)")
    assert fresh.state.soft["perf.busbw_low"]["runs"] == 1
    assert load(tmp_path / "none.json") == (State(), None)
    assert state_path({"ENVCHECK_HEALTH_STATE": "/x/y.json"}) == Path("/x/y.json")


def test_a_state_that_cannot_be_kept_is_envchecks_own_problem_and_leaves_nothing(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert save(blocker / "health-streaks.json", State()) is not None
    held = apply([SLOW], {"ENVCHECK_HEALTH_STATE": str(blocker / "health-streaks.json")}, Policy())
    assert held.problems[0].startswith(f"health streaks not kept in {blocker}/health-streaks.json")
    assert "soft findings cannot reach a drain" in held.problems[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_the_health_mode_hook_decides_the_exit_code_over_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ENVCHECK_SLURM_STATE", str(tmp_path / "slurm-prolog.json"))
    monkeypatch.setenv("SLURMD_NODENAME", "nowhere")
    monkeypatch.setenv("PATH", str(tmp_path))  # no sinfo here: the node is left as it is, which the hook says
    mode = Mode.of(request_of("run", "--for", "health", "--drain-after", "2"))

    def health_run(results: list[Result]) -> int:
        return mode.deliver(mode.decide(results, None), {})

    assert health_run([SLOW]) == 0
    first = capsys.readouterr()
    assert "envcheck: warning: [node] dist.busbw: " in first.err and "(soft: 1 of 2 health runs" in first.err
    assert health_run([SLOW]) == 1
    second = capsys.readouterr()
    assert (
        second.out.startswith("[node] dist.busbw: all_reduce busbw peak 0.06 GB/s")
        and "(in 2 health runs" in second.out
    )
    assert health_run([LOST]) == 1  # hard: at once


@pytest.mark.parametrize(
    "args, needle",
    [
        (["run", "--drain-after", "2"], "--drain-after applies to --for health only"),
        (["run", "--for", "prolog", "--resume-after", "2"], "--resume-after applies to --for health only"),
        (
            ["run", "--for", "health", "--drain-after", "0"],
            "give a whole number of health runs from 1 to 1000",
        ),
        (
            ["run", "--for", "health", "--resume-after", "many"],
            "give a whole number of health runs from 1 to 1000",
        ),
    ],
)
def test_bad_streak_flags_are_one_line_and_exit_2(args: list[str], needle: str) -> None:
    done = run_cli(*args, env={**os.environ, "ENVCHECK_SLURM_STATE": "/nonexistent/state.json"})
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and needle in lines[0], done.stderr


def test_a_health_run_not_started_by_slurmd_keeps_no_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    default = state_path({})
    existed = default.exists()
    held = apply([SLOW], {}, Policy())
    assert held.results[0].status is Status.WARN and held.state.soft["perf.busbw_low"]["runs"] == 1
    assert held.notes == [
        "no health streaks kept (ENVCHECK_HEALTH_STATE, ENVCHECK_SLURM_STATE, SLURMD_NODENAME unset): "
        "a soft finding cannot build a streak here"
    ]
    assert default.exists() == existed and apply([FAST], {}, Policy()).notes == []
    assert list(tmp_path.iterdir()) == []
