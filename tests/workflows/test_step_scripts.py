"""Run the real bash of the publishing steps, in order, in a scratch workspace.

Real: bash, the step scripts, .github/scripts/*.py, the GITHUB_OUTPUT / GITHUB_STEP_SUMMARY files.
Real too: the Makefile targets the steps call (make publish-verify / publish-promote).
Recorded stand-ins (they cannot run here: no GPU, no registry, no buildx, no Sigstore): `nvidia-smi` prints
a fixed CSV, `envcheck` writes a fixed report (the promote step's `envcheck` logs its arguments), `cosign` and
`docker` append their arguments to a log. tests/images/test_publish_registry.py runs the real publish path.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.workflows import gha

DIGEST = "sha256:" + "12" * 32
SMI = "index, name, driver_version, memory.total [MiB]\\n0, NVIDIA H100 80GB HBM3, 570.124.06, 81559 MiB"


def _step(job: str, name: str) -> dict:
    return next(
        s for s in gha.workflow("images.yml")["jobs"][job]["steps"] if s.get("name", "").startswith(name)
    )


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / ".github").symlink_to(gha.ROOT / ".github")
    (tmp_path / "Makefile").symlink_to(gha.ROOT / "Makefile")
    (tmp_path / "bin").mkdir()
    for name in ("python", "python3"):  # what setup-python / the runner image put on PATH
        (tmp_path / "bin" / name).symlink_to(sys.executable)
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "python").symlink_to(sys.executable)
    return tmp_path


def _shim(ws: Path, name: str, body: str, where: str = "bin") -> None:
    path = ws / where / name
    path.write_text(f"#!/bin/bash\n{body}\n")
    path.chmod(0o755)


def _run(ws: Path, step: dict, **env: str) -> subprocess.CompletedProcess[str]:
    full = {
        "PATH": f"{ws / 'bin'}:/usr/bin:/bin",
        "GITHUB_OUTPUT": str(ws / "output"),
        "GITHUB_STEP_SUMMARY": str(ws / "summary"),
        "RUNNER_TEMP": str(ws),
        "RUNNER_NAME": "gpu-box-1",
        **step.get("env", {}),
        **env,
    }
    full = {key: value for key, value in full.items() if "${{" not in value}
    return subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", step["run"]],
        cwd=ws,
        env=full,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_names_step_lowercases_the_image(workspace: Path) -> None:
    proc = _run(workspace, _step("build", "Image name"), GITHUB_REPOSITORY="Acme/EnvCheck")
    assert proc.returncode == 0, proc.stderr
    assert "image=ghcr.io/acme/envcheck\n" in (workspace / "output").read_text()


def _gpu_verify_then_promote(ws: Path, statuses: list[str]) -> subprocess.CompletedProcess[str]:
    ref = f"ghcr.io/acme/envcheck@{DIGEST}"
    (ws / "staged").mkdir()
    (ws / "staged" / "ref").write_text(ref + "\n")
    (ws / "staged" / "tags").write_text(
        "ghcr.io/acme/envcheck:2.8.0-cuda12.8-runtime\n\nghcr.io/acme/envcheck:latest-runtime\n"
    )
    code = int("fail" in statuses)
    run = {
        "schema_version": 1,
        "exit_code": code,
        "context": {},
        "facts": {},
        "results": [{"name": f"c{i}", "status": s} for i, s in enumerate(statuses)],
    }
    report = {
        "schema_version": 1,
        "exit_code": code,
        "images": [
            {"image": ref, "error": None, "container_exit_code": code, "exit_code": code, "report": run}
        ],
    }
    _shim(ws, "nvidia-smi", f'printf "{SMI}\\n"')
    _shim(
        ws,
        "envcheck",
        "json=''; while [ $# -gt 0 ]; do [ \"$1\" = --json ] && json=$2; shift; done\n"
        f"echo '{json.dumps(report)}' > \"$json\"\nexit {report['exit_code']}",
        where="venv/bin",
    )
    verify = _run(ws, _step("gpu-verify", "envcheck --level full"))
    assert (verify.returncode == 0) == (report["exit_code"] == 0), (
        verify.stderr
    )  # make exits 2 for a failed recipe
    evidence = _run(ws, _step("gpu-verify", "Verification evidence"), GITHUB_REPOSITORY="acme/envcheck")
    assert evidence.returncode == 0, evidence.stderr
    for tool in ("cosign", "docker"):
        _shim(ws, tool, f'echo "{tool} $*" >> "{ws}/calls"')
    _shim(
        ws,
        "envcheck",
        f'echo "envcheck $*" >> "{ws}/calls"; echo "promoted ghcr.io/acme/envcheck:latest-runtime"',
    )
    check = _run(ws, _step("promote", "The report is a pass"))
    if check.returncode != 0:
        return check
    return _run(ws, _step("promote", "Attest the GPU report"), PREDICATE_TYPE="https://example/v1")


def test_a_gpu_pass_is_attested_signed_then_tagged_by_digest(workspace: Path) -> None:
    proc = _gpu_verify_then_promote(workspace, ["pass", "skip"])
    assert proc.returncode == 0, proc.stderr
    ref = f"ghcr.io/acme/envcheck@{DIGEST}"
    assert (workspace / "calls").read_text().splitlines() == [
        f"cosign attest --yes --type https://example/v1 --predicate reports/predicate.json {ref}",
        f"cosign sign --yes {ref}",
        "envcheck image publish promote --state staged",
    ]
    assert "ghcr.io/acme/envcheck:latest-runtime" in (workspace / "summary").read_text()
    predicate = json.loads((workspace / "reports" / "predicate.json").read_text())
    assert (
        predicate["gpus"][0]["driver_version"] == "570.124.06" and predicate["runner"]["name"] == "gpu-box-1"
    )
    assert "NVIDIA H100 80GB HBM3" in (workspace / "summary").read_text()


def test_a_gpu_failure_never_reaches_cosign_or_the_tags(workspace: Path) -> None:
    proc = _gpu_verify_then_promote(workspace, ["pass", "fail"])
    assert proc.returncode == 1 and "refusing to promote" in proc.stderr
    assert not (workspace / "calls").exists()
    assert "NOT PASSED" in (workspace / "summary").read_text()
