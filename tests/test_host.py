"""envcheck host: driver and arch logic as pure functions, Docker GPU setup from a crafted root, the command."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from envcheck.host import (
    HostGpus,
    arch_problem,
    docker_gpu_setup,
    driver_problem,
    minor_compat_note,
    row_verdicts,
)
from envcheck.images import matrix_rules
from envcheck.images.matrix import default_matrix_path, load_matrix
from tests.helpers import run_cli


@pytest.mark.parametrize("driver, driver_cuda, row_cuda, problem", [
    ("525.60.13", "12.0", "12.8", None),  # minor-version compatibility: 12.x needs >= 525.60.13
    ("570.26", "12.8", "12.8", None),
    ("520.61.05", "11.8", "12.6", "CUDA 12.x needs >= 525.60.13"),
    ("575.51.03", "12.9", "13.0", "CUDA 13.x needs >= 580"),
    ("580.65.06", "13.0", "13.0", None),
    ("580.65.06", "13.0", "12.6", None),  # a newer driver runs older CUDA
    ("580.95.05", None, "13.0", None),  # nvidia-smi gave no driver CUDA: the version alone decides
    ("560.35.03", None, "13.0", "too old for CUDA 13.0"),
    (None, None, "13.0", None),  # no driver: unknown, not a verdict
])
def test_driver_problem(driver: str | None, driver_cuda: str | None, row_cuda: str, problem: str | None) -> None:
    found = driver_problem(driver, driver_cuda, row_cuda)
    assert (found is None) if problem is None else (found is not None and problem in found), found


def test_minor_compat_is_noted() -> None:
    assert "minor-version compatibility" in minor_compat_note("12.2", "12.8")
    assert minor_compat_note("13.0", "12.8") == ""


CU126 = matrix_rules.arch_list(matrix_rules.WHEEL_ARCH_LISTS["12.6"])
CU128 = matrix_rules.arch_list(matrix_rules.WHEEL_ARCH_LISTS["12.8"])
CU130 = matrix_rules.arch_list(matrix_rules.WHEEL_ARCH_LISTS["13.0"])


@pytest.mark.parametrize("caps, arch, missing", [
    ([(9, 0)], CU130, None),             # H100
    ([(6, 1)], CU130, "sm_61"),          # GTX 1080: CUDA 13 builds dropped Pascal
    ([(6, 1)], CU126, None),             # ...which cu126 still has (sm_60 SASS runs on 6.1)
    ([(12, 0)], CU126, "sm_120"),        # RTX 5090 needs a CUDA >= 12.8 build
    ([(12, 0)], CU128, None),
    ([(7, 0), (9, 0)], CU130, "sm_70"),  # V100 beside an H100: one GPU not covered is enough
    ([(8, 9)], CU126, None),             # L4 runs sm_86 SASS
])
def test_arch_problem(caps: list[tuple[int, int]], arch: list[str], missing: str | None) -> None:
    found = arch_problem(caps, arch)
    assert (found is None) if missing is None else (found is not None and missing in found), found


def test_arch_list_reads_torch_cuda_arch_list_syntax() -> None:
    assert matrix_rules.arch_list("8.6;12.0+PTX") == ["sm_86", "sm_120", "compute_120"]


def test_every_matrix_row_has_an_arch_list_on_record() -> None:
    assert all(row.arch_list for row in load_matrix(default_matrix_path()).rows)


def test_rows_on_an_h100_with_a_12_8_driver_and_on_a_pascal() -> None:
    rows = list(load_matrix(default_matrix_path()).rows)
    h100 = {v["row"]: v for v in row_verdicts(HostGpus("nvml", "570.172.08", "12.8", [(9, 0)], ["H100"]), rows)}
    assert h100["2.8-cu128"]["runs"] is True and h100["2.8-cu129"]["runs"] is True
    assert "minor-version compatibility" in h100["2.8-cu129"]["why"]
    assert h100["2.14-cu130"]["runs"] is False and "13.x needs >= 580" in h100["2.14-cu130"]["why"]
    assert "latest-runtime" in h100["2.14-cu130"]["tags"]
    pascal = row_verdicts(HostGpus("nvidia-smi", "580.65.06", "13.0", [(6, 1)], ["GTX 1080"]), rows)
    assert {v["row"] for v in pascal if v["runs"]} == {r.id for r in rows if r.cuda == "12.6"}
    nogpu = row_verdicts(HostGpus(why_none="no driver"), rows)
    assert all(v["runs"] is None and "needs an NVIDIA driver >=" in v["why"] for v in nogpu)


def test_docker_gpu_setup_from_files(tmp_path: Path) -> None:
    assert docker_gpu_setup(str(tmp_path))["ready"] is False
    (tmp_path / "etc/docker").mkdir(parents=True)
    (tmp_path / "etc/docker/daemon.json").write_text(json.dumps(
        {"runtimes": {"nvidia": {"path": "nvidia-container-runtime", "args": []}}}))
    found = docker_gpu_setup(str(tmp_path))
    assert found["ready"] is True and found["daemon_json_runtimes"] == ["nvidia"]
    (tmp_path / "etc/docker/daemon.json").write_text("{not json")
    (tmp_path / "var/run/cdi").mkdir(parents=True)
    (tmp_path / "var/run/cdi/nvidia.yaml").write_text('cdiVersion: "0.5.0"\nkind: nvidia.com/gpu\ndevices: []\n')
    found = docker_gpu_setup(str(tmp_path))
    assert found["ready"] is True and "CDI specs" in found["summary"] and "daemon_json_error" in found


def test_host_command_for_real_on_this_host(tmp_path: Path) -> None:
    done = run_cli("host", timeout=60)
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith("No NVIDIA GPU: ") or first.startswith("Driver ")
    assert "Docker GPU setup:" in done.stdout and "2.14-cu130" in done.stdout
    doc = json.loads(run_cli("host", "--json", "-", timeout=60).stdout)
    assert {r["row"] for r in doc["rows"]} == {r.id for r in load_matrix(default_matrix_path()).rows}
    if doc["gpu"]["source"] is None:  # no NVIDIA driver here: unknown, not "won't run"
        assert all(r["runs"] is None for r in doc["rows"])


def test_host_without_a_matrix_still_reports_the_host(tmp_path: Path) -> None:
    done = run_cli("host", env={**os.environ, "ENVCHECK_MATRIX": str(tmp_path / "none.toml")})
    assert done.returncode == 0 and "no matrix at" in done.stdout and "Docker GPU setup:" in done.stdout
    bad = run_cli("host", "--matrix", str(tmp_path / "nope.toml"))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "no such file" in bad.stderr


def test_host_with_gpus_prints_driver_gpus_and_verdicts(monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """The NVML/nvidia-smi layer is injected (no GPU here); the rest is the real command."""
    from envcheck import host

    fake = HostGpus("nvidia-smi", "575.57.08", "12.9", [(12, 0)], ["RTX 5090"],
                    listed=[{"name": "RTX 5090", "compute_capability": "12.0"}])
    monkeypatch.setattr(host, "read_host_gpus", lambda: fake)
    from envcheck.cli import main

    assert main(["host"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "Driver 575.57.08 (CUDA 12.9, from nvidia-smi); GPUs: RTX 5090 (sm_120)"
    assert main(["host", "--json", "-"]) == 0
    rows = {r["row"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    assert rows["2.9-cu126"]["runs"] is False and "sm_120" in rows["2.9-cu126"]["why"]
    assert rows["2.9-cu128"]["runs"] is True
    assert rows["2.14-cu130"]["runs"] is False and "needs >= 580" in rows["2.14-cu130"]["why"]
