"""envcheck host: driver and arch logic as pure functions, Docker GPU setup from a crafted root, the command."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from envcheck.host.docker_setup import docker_gpu_setup
from envcheck.host.rows import HostGpus, arch_problem, driver_problem, minor_compat_note, row_verdicts
from envcheck.images import matrix_rules
from envcheck.images.matrix import default_matrix_path, load_matrix
from tests.helpers import ROOT, run_cli


@pytest.mark.parametrize(
    "driver, driver_cuda, row_cuda, problem",
    [
        ("525.60.13", "12.0", "12.8", None),  # minor-version compatibility: 12.x needs >= 525.60.13
        ("570.26", "12.8", "12.8", None),
        ("520.61.05", "11.8", "12.6", "CUDA 12.x needs >= 525.60.13"),
        ("575.51.03", "12.9", "13.0", "CUDA 13.x needs >= 580"),
        ("580.65.06", "13.0", "13.0", None),
        ("580.65.06", "13.0", "12.6", None),  # a newer driver runs older CUDA
        ("580.95.05", None, "13.0", None),  # nvidia-smi gave no driver CUDA: the version alone decides
        ("560.35.03", None, "13.0", "too old for CUDA 13.0"),
        (None, None, "13.0", None),  # no driver: unknown, not a verdict
    ],
)
def test_driver_problem(
    driver: str | None, driver_cuda: str | None, row_cuda: str, problem: str | None
) -> None:
    found = driver_problem(driver, driver_cuda, row_cuda)
    assert (found is None) if problem is None else (found is not None and problem in found), found


def test_minor_compat_is_noted() -> None:
    assert "minor-version compatibility" in minor_compat_note("12.2", "12.8")
    assert minor_compat_note("13.0", "12.8") == ""


CU126 = matrix_rules.arch_list(matrix_rules.WHEEL_ARCH_LISTS["12.6"])
CU128 = matrix_rules.arch_list(matrix_rules.WHEEL_ARCH_LISTS["12.8"])
CU130 = matrix_rules.arch_list(matrix_rules.WHEEL_ARCH_LISTS["13.0"])


@pytest.mark.parametrize(
    "caps, arch, missing",
    [
        ([(9, 0)], CU130, None),  # H100
        ([(6, 1)], CU130, "sm_61"),  # GTX 1080: CUDA 13 builds dropped Pascal
        ([(6, 1)], CU126, None),  # ...which cu126 still has (sm_60 SASS runs on 6.1)
        ([(12, 0)], CU126, "sm_120"),  # RTX 5090 needs a CUDA >= 12.8 build
        ([(12, 0)], CU128, None),
        ([(7, 0), (9, 0)], CU130, "sm_70"),  # V100 beside an H100: one GPU not covered is enough
        ([(8, 9)], CU126, None),  # L4 runs sm_86 SASS
    ],
)
def test_arch_problem(caps: list[tuple[int, int]], arch: list[str], missing: str | None) -> None:
    found = arch_problem(caps, arch)
    assert (found is None) if missing is None else (found is not None and missing in found), found


def test_arch_list_reads_torch_cuda_arch_list_syntax() -> None:
    assert matrix_rules.arch_list("8.6;12.0+PTX") == ["sm_86", "sm_120", "compute_120"]


def test_every_matrix_row_has_an_arch_list_on_record() -> None:
    assert all(row.arch_list for row in load_matrix(default_matrix_path()).rows)


def test_rows_on_an_h100_with_a_12_8_driver_and_on_a_pascal() -> None:
    rows = list(load_matrix(default_matrix_path()).rows)
    h100 = {
        v["row"]: v for v in row_verdicts(HostGpus("nvml", "570.172.08", "12.8", [(9, 0)], ["H100"]), rows)
    }
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
    (tmp_path / "etc/docker/daemon.json").write_text(
        json.dumps({"runtimes": {"nvidia": {"path": "nvidia-container-runtime", "args": []}}})
    )
    found = docker_gpu_setup(str(tmp_path))
    assert found["ready"] is True and found["daemon_json_runtimes"] == ["nvidia"]
    (tmp_path / "etc/docker/daemon.json").write_text("{not json")
    (tmp_path / "var/run/cdi").mkdir(parents=True)
    (tmp_path / "var/run/cdi/nvidia.yaml").write_text(
        'cdiVersion: "0.5.0"\nkind: nvidia.com/gpu\ndevices: []\n'
    )
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


def test_host_with_a_missing_or_broken_matrix_is_a_usage_error(tmp_path: Path) -> None:
    """A matrix that is not there or not valid is bad input: one line naming it, exit 2, never exit 0."""
    missing = run_cli("host", env={**os.environ, "ENVCHECK_MATRIX": str(tmp_path / "none.toml")})
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "none.toml" in missing.stderr
    assert missing.stdout == ""
    bad = run_cli("host", "--matrix", str(tmp_path / "nope.toml"))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "not found" in bad.stderr
    broken = tmp_path / "broken.toml"
    broken.write_text("schema_version = 1\n[[rows]]\nid = 'x'\n")
    done = run_cli("host", "--matrix", str(broken))
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "broken.toml" in done.stderr
    listing = run_cli("matrix", "list", env={**os.environ, "ENVCHECK_MATRIX": str(broken)})
    assert listing.returncode == 2 and listing.stderr.count("\n") == 1


def test_the_shipped_matrix_is_the_clones_matrix() -> None:
    """One source of truth: docker/matrix.toml is a link to the package data an installed envcheck reads."""
    from envcheck.images.matrix import SHIPPED

    clone = ROOT / "docker" / "matrix.toml"
    assert clone.is_symlink() and clone.resolve() == SHIPPED.resolve()
    assert load_matrix(default_matrix_path()).rows == load_matrix(clone).rows


def test_host_with_gpus_prints_driver_gpus_and_verdicts(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The NVML/nvidia-smi layer is injected (no GPU here); the rest is the real command."""
    from envcheck.host import collect as host  # where `envcheck host` looks the reader up

    fake = HostGpus(
        "nvidia-smi",
        "575.57.08",
        "12.9",
        [(12, 0)],
        ["RTX 5090"],
        listed=[{"name": "RTX 5090", "compute_capability": "12.0"}],
    )
    monkeypatch.setattr(host, "read_host_gpus", lambda: fake)
    from envcheck.app.main import main

    assert main(["host"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "Driver 575.57.08 (CUDA 12.9, from nvidia-smi); GPUs: RTX 5090 (sm_120)"
    assert main(["host", "--json", "-"]) == 0
    rows = {r["row"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    assert rows["2.9-cu126"]["runs"] is False and "sm_120" in rows["2.9-cu126"]["why"]
    assert rows["2.9-cu128"]["runs"] is True
    assert rows["2.14-cu130"]["runs"] is False and "needs >= 580" in rows["2.14-cu130"]["why"]


# --- containers: compose GPU requests, CDI specs, /dev/char links -------------------------------------------
# Real-world: `capabilities: [gpu, utility]` leaves libcuda.so.1 out (https://github.com/mudler/LocalAI/issues/11973,
# https://github.com/weaviate/weaviate/issues/1736); Docker derives NVIDIA_DRIVER_CAPABILITIES from the request's
# NVIDIA capabilities (moby daemon/nvidia_linux.go). Stale CDI specs after a driver upgrade
# (https://github.com/NVIDIA/nvidia-container-toolkit/issues/692) and `unresolvable CDI devices nvidia.com/gpu=all`
# (https://github.com/NVIDIA/nvidia-container-toolkit/issues/146, https://github.com/moby/moby/issues/47633).

COMPOSE = """
services:
  good:
    image: x
    deploy: {resources: {reservations: {devices: [{driver: nvidia, count: all, capabilities: [gpu, compute, utility]}]}}}
  default-caps:
    image: x
    deploy: {resources: {reservations: {devices: [{capabilities: [gpu]}]}}}
  no-compute:
    image: x
    deploy: {resources: {reservations: {devices: [{driver: nvidia, count: 1, capabilities: [gpu, utility]}]}}}
  all-cap:
    image: x
    deploy: {resources: {reservations: {devices: [{driver: nvidia, capabilities: [gpu, all]}]}}}
  env-caps:
    image: x
    environment: ["NVIDIA_DRIVER_CAPABILITIES=utility,video"]
  amd:
    image: x
    deploy: {resources: {reservations: {devices: [{driver: amd, capabilities: [gpu]}]}}}
"""


def test_compose_gpu_problems_pure() -> None:
    import yaml

    from envcheck.host.compose_gpu import compose_gpu_problems, gpu_services

    compose = yaml.safe_load(COMPOSE)
    found = {p["service"]: p for p in compose_gpu_problems(compose)}
    assert set(found) == {"no-compute", "all-cap", "env-caps"}
    assert (
        "NVIDIA_DRIVER_CAPABILITIES=utility: without 'compute' libcuda.so.1 is not mounted"
        in found["no-compute"]["problem"]
    )
    assert found["no-compute"]["fix"].startswith("capabilities: [gpu, compute, utility]")
    assert (
        'could not select device driver "nvidia" with capabilities: [[gpu all]]'
        in found["all-cap"]["problem"]
    )
    assert "NVIDIA_DRIVER_CAPABILITIES='utility,video' lacks 'compute'" in found["env-caps"]["problem"]
    assert all(p["fault_class"] == "config" for p in found.values())
    assert gpu_services(compose) == ["all-cap", "default-caps", "good", "no-compute"]
    assert compose_gpu_problems({"services": {"x": {"deploy": {"resources": "junk"}}}}) == []
    assert compose_gpu_problems(["not", "a", "mapping"]) == []


def test_host_compose_lint_via_the_cli(tmp_path: Path) -> None:
    bad = tmp_path / "compose.yaml"
    bad.write_text(COMPOSE)
    done = run_cli("host", "--compose", str(bad), "--json", "-", timeout=60)
    assert done.returncode == 1, done.stderr
    problems = json.loads(done.stdout)["compose"]["problems"]
    assert [p["service"] for p in problems] == ["all-cap", "env-caps", "no-compute"]
    human = run_cli("host", "--compose", str(bad), timeout=60)
    assert human.returncode == 1 and "problem (config): service 'no-compute'" in human.stdout


def test_the_repos_own_compose_file_passes() -> None:
    done = run_cli("host", "--compose", str(ROOT / "compose.yaml"), "--json", "-", timeout=60)
    assert done.returncode == 0, done.stderr
    compose = json.loads(done.stdout)["compose"]
    assert compose["problems"] == [] and compose["gpu_services"] == ["jupyter", "ssh", "verify"]


def test_the_lint_reads_compose_configs_own_json(tmp_path: Path) -> None:
    """`docker compose config --format json` (real Compose v2, no engine needed) of the repo's file with
    [gpu, utility]: the anchors and profiles resolved by Compose itself, then linted as JSON."""
    from tests.compose.stack import compose_command

    try:
        compose = compose_command()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    source = tmp_path / "compose.yaml"
    source.write_text(
        (ROOT / "compose.yaml").read_text().replace("capabilities: [gpu]", "capabilities: [gpu, utility]")
    )
    config = subprocess.run(
        [
            *compose,
            "-f",
            str(source),
            "--profile",
            "verify",
            "--profile",
            "ssh",
            "config",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert config.returncode == 0, config.stderr
    (tmp_path / "config.json").write_text(config.stdout)
    done = run_cli("host", "--compose", str(tmp_path / "config.json"), "--json", "-", timeout=60)
    assert done.returncode == 1
    assert [p["service"] for p in json.loads(done.stdout)["compose"]["problems"]] == ["ssh", "verify"]


@pytest.mark.parametrize(
    "content, words",
    [
        (None, "cannot read compose file"),
        ("services: [a, b]\n", "not a compose file"),
        ("services: {a: [\n", "not valid YAML"),
        ("\xff\xfe", "not UTF-8"),
    ],
)
def test_bad_compose_file_is_one_line(tmp_path: Path, content: str | None, words: str) -> None:
    path = tmp_path / "c.yaml"
    if content is not None:
        path.write_bytes(content.encode("latin-1"))
    done = run_cli("host", "--compose", str(path), timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and words in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def _spec(root: Path, driver: str, libs_exist: bool) -> str:
    """A spec shaped like `nvidia-ctk cdi generate`'s, its host paths under `root`."""
    lib = root / f"usr/lib/x86_64-linux-gnu/libcuda.so.{driver}"
    hook = root / "usr/bin/nvidia-cdi-hook"
    for path in (root / "dev/nvidia0", root / "dev/nvidiactl", hook) + ((lib,) if libs_exist else ()):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    return f"""---
cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
- name: "0"
  containerEdits:
    deviceNodes:
    - path: {root}/dev/nvidia0
- name: all
  containerEdits:
    deviceNodes:
    - path: {root}/dev/nvidia0
containerEdits:
  deviceNodes:
  - path: {root}/dev/nvidiactl
  hooks:
  - hookName: createContainer
    path: {hook}
    args: [nvidia-cdi-hook, update-ldcache, --folder, /usr/lib/x86_64-linux-gnu]
  mounts:
  - hostPath: {lib}
    containerPath: /usr/lib/x86_64-linux-gnu/libcuda.so.{driver}
    options: [ro, nosuid, nodev, bind]
"""


def test_cdi_specs_fresh_stale_unreadable_and_missing(tmp_path: Path) -> None:
    from envcheck.host.cdi import cdi_report

    etc, run = tmp_path / "etc/cdi", tmp_path / "var/run/cdi"
    etc.mkdir(parents=True)
    run.mkdir(parents=True)
    (etc / "nvidia.yaml").write_text(_spec(tmp_path / "fresh", "570.86.15", libs_exist=True))
    fresh = cdi_report([str(etc), str(run)], gpus_present=True, driver="570.86.15")
    assert fresh["problems"] == [] and fresh["specs"][0]["devices"] == ["0", "all"]
    assert cdi_report([str(run)], gpus_present=False)["problems"] == []  # no GPU: no CDI needed
    (missing,) = cdi_report([str(run)], gpus_present=True)["problems"]
    assert (
        "no CDI spec offers nvidia.com/gpu" in missing["problem"]
        and "unresolvable CDI devices" in missing["problem"]
        and missing["fix"].startswith("sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml")
    )
    (etc / "nvidia.yaml").write_text(_spec(tmp_path / "old", "550.54.15", libs_exist=False))
    (run / "broken.json").write_text('{"cdiVersion": "0.6.0", "kind": ')
    (run / "other.json").write_text(
        json.dumps({"cdiVersion": "0.6.0", "kind": "vendor.com/x", "devices": [{"name": "a"}]})
    )
    report = cdi_report([str(etc), str(run)], gpus_present=True, driver="570.86.15")
    stale, broken = report["problems"]
    assert "nvidia.yaml (nvidia.com/gpu) is stale: 1 host path(s)" in stale["problem"]
    assert "libraries of driver 550.54.15, but the driver is 570.86.15" in stale["problem"]
    assert stale["fault_class"] == "node" and "regenerate it after every driver upgrade" in stale["fix"]
    assert "broken.json cannot be used" in broken["problem"]
    assert {s["kind"] for s in report["specs"]} == {"nvidia.com/gpu", "vendor.com/x", None}


def test_cdi_without_an_all_device_is_named(tmp_path: Path) -> None:
    from envcheck.host.cdi import cdi_problems, spec_from

    spec = spec_from("x.json", {"kind": "nvidia.com/gpu", "devices": [{"name": "0"}]})
    (problem,) = cdi_problems([spec], gpus_present=True)
    assert "offer 0 but not 'all'" in problem["problem"]


def test_host_cli_reads_cdi_from_env_dirs_with_gpus_injected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The GPU layer is injected (no GPU here); the CDI files and the command are real."""
    from envcheck.app.main import main
    from envcheck.host import collect as host  # where `envcheck host` looks the reader up

    (tmp_path / "cdi").mkdir()
    (tmp_path / "cdi/nvidia.yaml").write_text(_spec(tmp_path / "old", "550.54.15", libs_exist=False))
    monkeypatch.setenv("ENVCHECK_CDI_DIRS", str(tmp_path / "cdi"))
    monkeypatch.setattr(
        host,
        "read_host_gpus",
        lambda: HostGpus(
            "nvml",
            "570.86.15",
            "12.8",
            [(9, 0)],
            ["H100"],
            listed=[{"name": "H100", "compute_capability": "9.0"}],
        ),
    )
    assert main(["host"]) == 0
    out = capsys.readouterr().out
    assert f"CDI nvidia.com/gpu: 0, all ({tmp_path}/cdi/nvidia.yaml)" in out
    assert "problem (node): CDI spec" in out and "driver 550.54.15, but the driver is 570.86.15" in out


def test_dev_char_problem() -> None:
    from envcheck.host.docker_setup import dev_char_problem

    problem = dev_char_problem(["nvidia0 (195:0)"], None)
    assert problem is not None and problem["fault_class"] == "node"
    assert "nvidia0 (195:0)" in problem["problem"] and "systemctl daemon-reload" in problem["problem"]
    assert problem["fix"].startswith("sudo nvidia-ctk system create-dev-char-symlinks --create-all")
    assert dev_char_problem(["nvidia0 (195:0)"], "cgroupfs") is None  # Docker set to cgroupfs: not affected
    assert dev_char_problem([], None) is None


def test_yaml_without_pyyaml_is_one_line_and_json_still_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PyYAML is not a dependency of envcheck: its absence is staged by hiding the module."""
    import sys

    from envcheck.core.errors import UsageError
    from envcheck.host.documents import read_document

    monkeypatch.setitem(sys.modules, "yaml", None)
    (tmp_path / "c.yaml").write_text(COMPOSE)
    with pytest.raises(UsageError) as info:
        read_document(str(tmp_path / "c.yaml"), "compose file")
    assert "reading YAML needs PyYAML" in info.value.message and "--format json" in info.value.message
    (tmp_path / "c.json").write_text(json.dumps({"services": {"a": {"image": "x"}}}))
    assert read_document(str(tmp_path / "c.json"), "compose file") == {"services": {"a": {"image": "x"}}}


def test_an_arm64_host_is_offered_only_the_rows_with_an_arm64_image() -> None:
    """On aarch64 (a GH200 or GB200 host) rows built for amd64 only do not run, GPU or not, and say why; the rows
    whose tag is a multi-platform manifest with linux/arm64 are judged as on amd64 (the healthy twin)."""
    from envcheck.host.rows import host_platform

    assert host_platform("aarch64") == "linux/arm64" and host_platform("x86_64") == "linux/amd64"
    rows = list(load_matrix(default_matrix_path()).rows)
    gh200 = HostGpus("nvml", "580.95.05", "13.0", [(9, 0)], ["NVIDIA GH200 480GB"], listed=[])
    verdicts = {v["row"]: v for v in row_verdicts(gh200, rows, "linux/arm64")}
    assert verdicts["2.14-cu130"]["runs"] is True and verdicts["2.11-cu130"]["runs"] is True
    assert verdicts["2.10-cu130"]["runs"] is False
    assert verdicts["2.10-cu130"]["why"] == "no linux/arm64 image: this row is built for linux/amd64 only"
    on_amd64 = {v["row"]: v for v in row_verdicts(gh200, rows, "linux/amd64")}
    assert on_amd64["2.10-cu130"]["runs"] is True and on_amd64["2.14-cu130"]["runs"] is True
    no_gpu = {v["row"]: v for v in row_verdicts(HostGpus(), rows, "linux/arm64")}
    assert no_gpu["2.14-cu130"]["runs"] is None and no_gpu["2.8-cu126"]["runs"] is False
