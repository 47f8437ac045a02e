"""`envcheck matrix github` against docker/matrix.toml, and the images.yml step that calls it.

Needs the images helper's matrix code and main's CLI (skipped visibly, naming the missing files, before
they are merged). Everything here is real: the real CLI in a subprocess, the real bash of the workflow step.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import run_cli
from tests.workflows import gha
from tests.workflows.matrix_file import (
    MALFORMED,
    MATRIX,
    ROOT,
    expected_pairs,
    matrix_rows,
    requires_matrix_cli,
)

pytestmark = requires_matrix_cli
BUILD_ARG_KEYS = {
    "TORCH_VERSION",
    "TORCHVISION_VERSION",
    "TORCHAUDIO_VERSION",
    "CUDA_VERSION",
    "TORCH_INDEX_URL",
    "PYTHON_VERSION",
    "BASE_IMAGE",
}


def matrix_github(*args: str, env: dict[str, str] | None = None) -> dict:
    proc = run_cli("matrix", "github", *args, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().count("\n") == 0, "one line of JSON, nothing else"
    return json.loads(proc.stdout)


def test_output_covers_every_row_and_target_of_the_file() -> None:
    include = matrix_github()["include"]
    pairs = [(entry["row"], entry["target"]) for entry in include]
    assert len(pairs) == len(set(pairs)), "no duplicate entries"
    assert set(pairs) == expected_pairs() and pairs


def test_entries_carry_the_file_values() -> None:
    rows = {row["id"]: row for row in matrix_rows()}
    for entry in matrix_github()["include"]:
        row = rows[entry["row"]]
        assert (entry["torch"], entry["cuda"], entry["python"]) == (row["torch"], row["cuda"], row["python"])
        args = dict(line.split("=", 1) for line in entry["build_args"].splitlines())
        assert args.keys() == BUILD_ARG_KEYS
        assert args["TORCH_VERSION"] == row["torch"] and args["TORCH_INDEX_URL"] == row["index_url"]
        tags = entry["tags"].split(",")
        assert tags[0] == f"{row['torch']}-cuda{row['cuda']}-{entry['target']}", "full tag first"
        assert all(tag.endswith(f"-{entry['target']}") for tag in tags)
        assert entry["platforms"] == ",".join(row["platforms"])  # the file's, defaults applied


def test_latest_row_gets_latest_tags_and_no_other_row_does() -> None:
    latest = {row["id"] for row in matrix_rows() if row.get("latest")}
    assert len(latest) <= 1
    for entry in matrix_github()["include"]:
        has = f"latest-{entry['target']}" in entry["tags"].split(",")
        assert has == (entry["row"] in latest), entry["row"]


def test_row_and_target_filters_select_one_entry() -> None:
    row, target = sorted(expected_pairs())[0]
    include = matrix_github("--row", row, "--target", target)["include"]
    assert [(e["row"], e["target"]) for e in include] == [(row, target)]


def test_env_var_and_flag_point_at_another_file(tmp_path: Path) -> None:
    other = tmp_path / "matrix.toml"
    text = MATRIX.read_text()
    other.write_text(text)
    assert matrix_github("--matrix", str(other)) == matrix_github()
    assert matrix_github(env={**os.environ, "ENVCHECK_MATRIX": str(other)}) == matrix_github()


@pytest.mark.parametrize(("mutate", "names"), MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_file_is_one_line_exit_2(tmp_path: Path, mutate, names: list[str]) -> None:
    bad = tmp_path / "matrix.toml"
    bad.write_text(mutate(MATRIX.read_text()))
    proc = run_cli("matrix", "github", "--matrix", str(bad))
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    message = proc.stderr.strip()
    assert "\n" not in message and "matrix.toml" in message, message
    for name in names:
        assert name in message, f"the error must name the field {name!r}: {message}"


def _run_matrix_step(tmp_path: Path, row: str = "", target: str = "") -> dict:
    """Execute the real bash of images.yml's matrix step. Only `pip install .` is replaced (a shim on
    PATH skips it; reinstalling into the test venv would be slow and change it); `envcheck` is the real CLI
    of this tree."""
    step = next(s for s in gha.workflow("images.yml")["jobs"]["matrix"]["steps"] if s.get("id") == "matrix")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").write_text(
        f'#!/bin/sh\nif [ "$1 $2 $3" = "-m pip install" ]; then exit 0; fi\nexec {sys.executable} "$@"\n'
    )
    (bin_dir / "envcheck").write_text(f'#!/bin/sh\nexec {sys.executable} -m envcheck "$@"\n')
    for shim in bin_dir.iterdir():
        shim.chmod(0o755)
    output = tmp_path / "github_output"
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "GITHUB_OUTPUT": str(output),
        "ROW": row,
        "TARGET": target,
        "PYTHONPATH": str(ROOT),
    }
    proc = subprocess.run(
        ["bash", "-e", "-c", step["run"]],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    line = next(ln for ln in output.read_text().splitlines() if ln.startswith("matrix="))
    return json.loads(line.removeprefix("matrix="))


def test_workflow_matrix_step_outputs_every_row_and_target(tmp_path: Path) -> None:
    matrix = _run_matrix_step(tmp_path, target="all")
    assert {(e["row"], e["target"]) for e in matrix["include"]} == expected_pairs()


def test_workflow_matrix_step_honours_dispatch_inputs(tmp_path: Path) -> None:
    row, target = sorted(expected_pairs())[-1]
    matrix = _run_matrix_step(tmp_path, row=row, target=target)
    assert [(e["row"], e["target"]) for e in matrix["include"]] == [(row, target)]
