"""envcheck's own usage errors in the node modes (docs/cluster.md, "Usage errors in node modes"), mode by mode, through
the real CLI in a subprocess; the Slurm side (slurmd's prolog, the health check repeating it) is in
tests/cluster/test_documented_slurm.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from envcheck.app.usage import node_mode, option_value
from envcheck.cluster.mode_names import ModeName

ROOT = Path(__file__).resolve().parents[2]
TYPO = ("--timout", "60")


def envcheck(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    return subprocess.run(
        [sys.executable, "-m", "envcheck", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**clean, "PYTHONPATH": str(ROOT), **env},
        check=False,
    )


def test_the_mode_is_read_from_the_arguments_argparse_stopped_at() -> None:
    assert (
        option_value(["run", "--for", "npd", "--for=prolog"], "--for") == "prolog"
    )  # the last wins, as argparse
    assert option_value(["run", "--", "--for", "npd"], "--for") is None
    assert node_mode(["run", "--for", "health"], {}) is ModeName.HEALTH
    assert node_mode(["run", "--fro", "prolog"], {}) is None
    assert node_mode(["run", "--fro", "prolog"], {"SLURM_SCRIPT_CONTEXT": "prolog_slurmd"}) is ModeName.PROLOG
    assert node_mode(["run"], {"SLURM_SCRIPT_CONTEXT": "prolog_task"}) is None  # a TaskProlog drains nothing


@pytest.mark.parametrize(
    "mode, context, code",
    [
        ("prolog", None, 2),
        ("prolog", "prolog_slurmd", 0),
        ("prolog", "epilog_slurmd", 0),
        ("health", None, 2),
        ("npd", None, 2),
        ("preflight", None, 2),
    ],
)
def test_a_usage_error_is_one_line_its_code_and_a_metrics_file(
    tmp_path: Path, mode: str, context: str | None, code: int
) -> None:
    env = (
        {"SLURM_SCRIPT_CONTEXT": context, "ENVCHECK_SLURM_STATE": str(tmp_path / "state.json")}
        if context
        else {}
    )
    prom = tmp_path / "envcheck.prom"
    done = envcheck("run", "--for", mode, "--prometheus", str(prom), *TYPO, **env)
    assert done.returncode == code, done.stderr
    assert done.stdout == "" and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("envcheck: error: unrecognized arguments: --timout 60")
    assert f"a usage error in the {mode} command: this node was not checked" in done.stderr
    got = {
        (s.name, tuple(s.labels.items())): s.value
        for fam in text_string_to_metric_families(prom.read_text())
        for s in fam.samples
    }
    assert got[("envcheck_usage_error", (("mode", mode),))] == 1
    assert got[("envcheck_exit_code", (("mode", mode),))] == code
    assert not [name for name, _ in got if name.startswith(("envcheck_check_", "envcheck_node_fault"))]
    assert (tmp_path / "state.json").exists() == (context is not None)  # only slurmd's prolog keeps it


def test_a_usage_error_outside_the_node_modes_is_unchanged() -> None:
    done = envcheck("run", *TYPO)
    assert done.returncode == 2
    assert done.stderr == "envcheck: error: unrecognized arguments: --timout 60 (try `envcheck --help`)\n"


def test_a_healthy_run_writes_the_usage_error_series_as_0(tmp_path: Path) -> None:
    prom = tmp_path / "envcheck.prom"
    done = envcheck(
        "run", "--for", "npd", "--allow-cpu", "--only", "container.shm", "--prometheus", str(prom)
    )
    assert done.returncode == 0, done.stderr
    assert 'envcheck_usage_error{mode="npd"} 0.0' in prom.read_text()
