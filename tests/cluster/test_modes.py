"""Each cluster mode through its one object (envcheck.app.cluster_mode.Mode), built from a request as `envcheck run`
builds it: its budget, its selection, how it reclassifies and decides, what it says and writes, and its exit code.

Real: the parser and its request, the exit policy, the state files, the Prometheus textfile (prometheus_client).
Staged: the results (a node that lost GPUs cannot be made here) and Slurm's environment (no sinfo on PATH, so the
health check leaves the node as it is; the Slurm side runs for real in tests/cluster/test_slurm*.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envcheck.app.cluster_mode import HEALTH_CHECKS_S, Health, Mode, Npd, Preflight, Prolog
from envcheck.checks.cuda.verdict import GPU_COUNT
from envcheck.core.check import ProfileOptions
from envcheck.core.errors import FatalError, UsageError
from envcheck.core.result import errored, failed, passed
from tests.helpers import request_of

LOST = failed(
    "4 GPU(s) visible, 8 expected",
    "docker run --gpus all",
    measured={"gpus": 4},
    expected={"gpus": 8},
    fault_class="config",
    code=GPU_COUNT,
).named("cuda.devices", 0.1)
EIGHT = passed("8 GPU(s) visible", measured={"gpus": 8}).named("cuda.devices", 0.1)
CRASHED = errored("timed out after 30s").named("cuda.devices", 30.0)  # envcheck's own failure: no class


def mode_of(*argv: str) -> Mode:
    return Mode.of(request_of("run", *argv))


@pytest.fixture(autouse=True)
def no_slurm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Slurm's state and streaks in this test's folder; no sinfo or scontrol to call."""
    for name in ("SLURMD_NODENAME", "SLURM_JOB_ID", "ENVCHECK_HEALTH_STATE", "SLURM_SCRIPT_CONTEXT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ENVCHECK_SLURM_STATE", str(tmp_path / "slurm-prolog.json"))
    monkeypatch.setenv("PATH", str(tmp_path))


@pytest.mark.parametrize(
    "argv, kind, label",
    [
        ([], Mode, "run"),
        (["--for", "preflight"], Preflight, "preflight"),
        (["--for", "prolog"], Prolog, "prolog"),
        (["--for", "npd"], Npd, "npd"),
        (["--for", "health"], Health, "health"),
    ],
)
def test_for_names_one_mode_object(argv: list[str], kind: type[Mode], label: str) -> None:
    mode = mode_of(*argv)
    assert type(mode) is kind and mode.label == label
    assert mode.table_to_stderr == bool(argv)  # under --for, stdout carries the verdict line


@pytest.mark.parametrize(
    "argv, timeout",
    [
        (["--timeout", "300"], 300.0),
        (["--for", "prolog", "--timeout", "300"], 300.0),
        (["--for", "health", "--timeout", "300"], HEALTH_CHECKS_S),
        (["--for", "health"], HEALTH_CHECKS_S),
        (["--for", "health", "--timeout", "20"], 20.0),
        ([], None),
    ],
)
def test_only_the_health_check_caps_its_budget(argv: list[str], timeout: float | None) -> None:
    assert mode_of(*argv).timeout == timeout


@pytest.mark.parametrize("argv", [["--drain-after", "2"], ["--for", "npd", "--resume-after", "2"]])
def test_only_the_health_check_takes_streak_flags(argv: list[str]) -> None:
    with pytest.raises(UsageError, match="applies to --for health only"):
        mode_of(*argv)
    assert mode_of("--for", "health", *argv[-2:]).timeout == HEALTH_CHECKS_S


NODE = ProfileOptions(profile="h100-sxm-8", gpu_count=8)
TORCH = ProfileOptions(profile="site", gpu_count=8, level="torch")


@pytest.mark.parametrize(
    "argv, only, profile, node_path",
    [
        (["--for", "prolog"], [], NODE, True),
        (["--for", "npd"], [], NODE, True),
        (["--for", "health"], [], NODE, True),
        (["--for", "prolog"], [], TORCH, False),  # a profile that asks for the torch checks too
        (["--for", "preflight"], [], NODE, False),  # a pod runs the torch checks
        ([], [], NODE, False),
        ([], ["node.cuda_driver", "node.profile"], ProfileOptions(), True),  # in any mode
        (["--for", "prolog"], ["node.cuda_driver", "cuda.available"], NODE, False),
    ],
)
def test_the_mode_selects_the_node_path_or_the_torch_path(
    argv: list[str], only: list[str], profile: ProfileOptions, node_path: bool
) -> None:
    assert mode_of(*argv).node_path(only, profile) is node_path


@pytest.mark.parametrize(
    "argv, fault_class, code",
    [
        ([], "config", 1),  # a plain run: a failed check is exit 1, its class as the check gave it
        (["--for", "preflight"], "config", 0),  # in a pod, the pod spec can still be at fault: not the node's
        (["--for", "prolog"], "node", 1),
        (["--for", "npd"], "node", 1),
        (["--for", "health"], "node", 1),  # a lost GPU is hard: no streak to wait for
    ],
)
def test_a_node_short_of_its_gpus_is_the_nodes_fault_where_the_cluster_runs_envcheck(
    argv: list[str], fault_class: str, code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    mode = mode_of(*argv)
    verdict = mode.decide([LOST], 8)
    assert verdict.results[0].fault_class == fault_class and mode.deliver(verdict, {}) == code
    said = capsys.readouterr()
    if fault_class == "node":
        assert said.out == "[node] cuda.devices: 4 GPU(s) visible, 8 expected: this node lost GPUs\n"
    else:  # nothing on stdout: a plain run's table is the caller's, preflight's config fault is a warning
        assert said.out == ""
    healthy = mode_of(*argv)  # the healthy twin: all 8 GPUs, nothing blamed
    assert healthy.deliver(healthy.decide([EIGHT], 8), {}) == 0
    assert "[node]" not in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, code, line",
    [
        (["--for", "npd"], 2, "envcheck: could not judge the node\n"),  # npd's "unknown"
        (["--for", "prolog"], 0, ""),  # envcheck's own failure never drains a node
        (["--for", "preflight"], 0, ""),
        ([], 1, ""),
    ],
)
def test_a_crashed_check_is_no_evidence_against_the_node(
    argv: list[str], code: int, line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    mode = mode_of(*argv)
    assert mode.deliver(mode.decide([CRASHED], None), {}) == code
    assert capsys.readouterr().out == line


def test_npd_always_says_a_message_and_a_report_on_stdout_moves_it_to_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    npd = mode_of("--for", "npd")
    assert npd.deliver(npd.decide([EIGHT], 8), {}) == 0
    assert capsys.readouterr().out == "envcheck: node OK\n"
    quiet = mode_of("--for", "npd", "--json", "-")  # stdout carries the JSON report alone
    assert quiet.deliver(quiet.decide([LOST], 8), {}) == 1
    said = capsys.readouterr()
    assert said.out == "" and said.err.endswith("this node lost GPUs\n")


def test_the_prolog_keeps_its_verdict_for_the_health_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "slurm-prolog.json"
    prolog = mode_of("--for", "prolog")
    assert prolog.deliver(prolog.decide([LOST], 8), {}) == 1
    assert not state.exists()  # not started by slurmd: nothing kept
    monkeypatch.setenv("SLURMD_NODENAME", "n1")
    assert prolog.deliver(prolog.decide([LOST], 8), {}) == 1
    assert json.loads(state.read_text())["reason"].startswith("[node] cuda.devices: 4 GPU(s) visible")
    assert prolog.deliver(prolog.decide([EIGHT], 8), {}) == 0
    assert not state.exists()  # the node passes again: no reason left for the health check
    capsys.readouterr()


def test_the_health_check_repeats_the_prologs_usage_error_in_its_words_and_metrics(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("prometheus_client")
    (tmp_path / "slurm-prolog.json").write_text(json.dumps({"usage_error": "unrecognized arguments: --fro"}))
    prom = tmp_path / "envcheck.prom"
    health = mode_of("--for", "health", "--prometheus", str(prom))
    assert health.deliver(health.decide([EIGHT], 8), {}) == 0
    err = capsys.readouterr().err
    assert "this node's prolog runs envcheck with a usage error (unrecognized arguments: --fro)" in err
    assert 'envcheck_usage_error{mode="prolog"} 1.0' in prom.read_text()
    npd = mode_of("--for", "npd", "--prometheus", str(prom))  # only the health check carries it
    assert npd.deliver(npd.decide([EIGHT], 8), {}) == 0
    assert 'mode="prolog"' not in prom.read_text() and "usage error" not in capsys.readouterr().err


@pytest.mark.parametrize("argv, label", [([], "run"), (["--for", "preflight"], "preflight")])
def test_the_metrics_file_names_the_mode_and_its_exit_code(
    argv: list[str], label: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("prometheus_client")
    prom = tmp_path / "envcheck.prom"
    mode = mode_of(*argv, "--prometheus", str(prom))
    code = mode.deliver(mode.decide([LOST], 8), {})
    assert f'envcheck_exit_code{{mode="{label}"}} {code}.0' in prom.read_text()


def test_a_plain_runs_own_failure_is_its_error_and_a_cluster_modes_a_warning(
    capsys: pytest.CaptureFixture[str],
) -> None:
    plain = mode_of()
    with pytest.raises(FatalError, match="cannot write report.json") as info:
        plain.deliver(plain.decide([EIGHT], 8), {}, ["cannot write report.json: No space left on device"])
    assert info.value.exit_code == 3
    npd = mode_of("--for", "npd")
    assert npd.deliver(npd.decide([EIGHT], 8), {}, ["cannot write report.json: No space left on device"]) == 2
    assert "cannot write report.json" in capsys.readouterr().err


def test_the_verdict_keeps_what_the_reports_show_apart_from_what_was_judged(tmp_path: Path) -> None:
    soft = failed("busbw low", fault_class="node", code="perf.busbw_low").named("dist.busbw", 1.0)
    health = mode_of("--for", "health", "--drain-after", "3")
    verdict = health.decide([soft], None)
    assert [r.status.value for r in verdict.results] == ["fail"]  # the reports: the check's own verdict
    assert [r.status.value for r in verdict.judged] == ["warn"]  # the exit policy: 1 of 3 runs, held
    assert verdict.decision.code == 0 and verdict.judged[0].summary.endswith(
        "health runs in a row before a drain)"
    )
