"""GPU device nodes that exist but cannot be opened, and the capabilities a GPU request must carry.

Real-world cases:
- A running container loses its GPUs after `systemctl daemon-reload` on a host whose Docker uses the systemd cgroup
  driver: `nvidia-smi` in it says "Failed to initialize NVML: Unknown Error"; the device cgroup went from
  `c 195:0 rw` to `c 195:* m` (https://github.com/NVIDIA/nvidia-container-toolkit/issues/251), because runc needs
  /dev/char/<major>:<minor> links the NVIDIA driver does not create
  (https://github.com/NVIDIA/nvidia-container-toolkit/issues/48, also NVIDIA/nvidia-docker#1730, #1671 and
  https://forums.developer.nvidia.com/t/containers-losing-access-to-gpus-failed-to-initialize-nvml/242308).
- torch's own words there: "UserWarning: Can't initialize NVML" (https://github.com/pytorch/pytorch/issues/109098).
- `capabilities: [gpu, utility]` in compose leaves libcuda.so.1 out of the container
  (https://github.com/mudler/LocalAI/issues/11973, https://github.com/weaviate/weaviate/issues/1736).

Simulated: no NVIDIA driver exists here, so the /dev/nvidia* nodes (major 195) have nothing behind them and NVML
and libcuda are absent. Real: the nodes themselves (mknod in a private mount namespace), the kernel refusing
open() (a nodev mount gives EACCES; a cgroup-v1 device cgroup with `c 195:* m`, the rule
NVIDIA/nvidia-container-toolkit#251 shows after the reload, gives EPERM), envcheck's capture in a spawned
worker, the CLI, the bundle and its replay.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from envcheck.checks.cuda.capture import device_open_errors, missing_char_symlinks
from envcheck.checks.cuda.finding import CudaLayers
from envcheck.checks.cuda.layers import DAEMON_RELOAD_FIX, diagnose
from envcheck.checks.cuda.verdict import cuda_available_verdict
from envcheck.core.errors import UsageError
from envcheck.evidence.bundle import validate_bundle
from tests.helpers import ROOT, make_context, run_cli

NODES = ["nvidia-uvm", "nvidia0", "nvidiactl"]
NVML_UNKNOWN = (
    "NVML init: Unknown Error"  # pynvml's str() of NVML_ERROR_UNKNOWN, as bundle.nvml_gpus words it
)
TORCH_NVML = "Can't initialize NVML"  # pytorch/pytorch#109098


def layers(**changes: object) -> CudaLayers:
    """A container on a GPU host whose libcuda loads: only the device layer varies."""
    base: dict[str, object] = dict(
        torch_installed=True,
        torch_cuda="12.8",
        device_nodes=NODES,
        proc_driver=True,
        in_container=True,
        driver_cuda=12080,
        driver_capabilities="compute,utility",
    )
    return CudaLayers(**{**base, **changes})  # type: ignore[arg-type]


def test_eperm_in_a_container_is_the_daemon_reload_cgroup_with_its_host_fix() -> None:
    found = diagnose(
        layers(
            device_access={"nvidia0": "EPERM", "nvidiactl": "EPERM"},
            nvml_error=NVML_UNKNOWN,
            torch_error=TORCH_NVML,
        )
    )
    first = found[0]
    assert first.layer == "devices" and first.fault_class == "node"
    assert "/dev/nvidia0, /dev/nvidiactl exist but open() is refused (EPERM)" in first.problem
    assert "Unknown Error" in first.problem and "systemctl daemon-reload" in first.problem
    assert "/dev/char" in first.problem and "nvidia-container-toolkit#48" in first.problem
    assert "nvidia-ctk system create-dev-char-symlinks --create-all" in first.fix
    assert "71-nvidia-dev-char.rules" in first.fix and "native.cgroupdriver=cgroupfs" in first.fix
    assert "recreate the container" in first.fix and "nvidia.com/gpu=all" in first.fix


def test_the_verdict_names_the_device_cause_first_and_drops_the_generic_999() -> None:
    cuda = {
        "torch_installed": True,
        "torch_cuda": "12.8",
        "available": False,
        "gpus": [],
        "torch_error": "CUDA initialization: CUDA unknown error - this may be due to an incorrectly set up "
        "environment",
        "visible_devices": None,
        "device_nodes": NODES,
        "proc_driver": True,
        "proc_driver_version": None,
        "in_container": True,
        "libcuda_error": None,
        "driver_cuda": 12080,
        "driver_capabilities": "compute,utility",
        "device_access": {"nvidia0": "EPERM"},
    }
    result = cuda_available_verdict(cuda, make_context(allow_cpu=False))
    assert result.status.value == "fail" and result.fault_class == "node"
    assert "open() is refused (EPERM)" in result.summary
    assert [f["layer"] for f in result.measured["findings"]] == ["devices"]  # not also "999: driver wedged"
    without = cuda_available_verdict({**cuda, "device_access": {}}, make_context(allow_cpu=False))
    assert "CUDA error 999" in without.summary  # the rule fires on the evidence, not on the 999 alone


def test_eperm_outside_a_container_is_a_job_or_unit_device_policy() -> None:
    (first, *_) = diagnose(layers(in_container=False, device_access={"nvidia0": "EPERM"}))
    assert first.layer == "devices" and first.fault_class == "config"
    assert "ConstrainDevices" in first.problem and "--gres=gpu:N" in first.fix and "DeviceAllow" in first.fix


@pytest.mark.parametrize(
    "refused, named",
    [
        # Slurm confines a job to its GPUs with the device cgroup (ConstrainDevices=yes: NVIDIA/pyxis#47, #72)
        ({"nvidia1": "EPERM"}, False),  # a Slurm job given GPU 0 of two: GPU 1 is refused by design
        ({"nvidia0": "EPERM", "nvidia1": "EPERM"}, True),  # no GPU left
        ({"nvidia-uvm": "EPERM"}, True),  # CUDA needs /dev/nvidia-uvm
        ({"nvidiactl": "EACCES"}, True),
    ],
)
def test_only_refusals_that_leave_no_usable_gpu_are_named(refused: dict[str, str], named: bool) -> None:
    nodes = ["nvidia-uvm", "nvidia0", "nvidia1", "nvidiactl"]
    found = diagnose(layers(in_container=False, device_nodes=nodes, device_access=refused))
    assert (found[0].layer == "devices") is named, found


@pytest.mark.parametrize("in_container, fault", [(True, "config"), (False, "node")])
def test_eacces_is_the_nodes_mode_or_a_nodev_mount(in_container: bool, fault: str) -> None:
    (first, *_) = diagnose(layers(in_container=in_container, device_access={"nvidiactl": "EACCES"}))
    assert first.layer == "devices" and first.fault_class == fault
    assert "EACCES: permission denied" in first.problem and "nodev" in first.problem
    assert "--group-add" in first.fix and "findmnt -T /dev/nvidia0" in first.fix


def test_nvml_unknown_error_alone_names_the_likely_cause_and_says_it_is_unconfirmed() -> None:
    (first, *_) = diagnose(layers(nvml_error=NVML_UNKNOWN, torch_error=TORCH_NVML))
    assert first.layer == "devices" and first.fault_class == "node"
    assert "NVML says 'NVML init: Unknown Error'" in first.problem and "was not captured" in first.problem
    assert first.fix == DAEMON_RELOAD_FIX


def test_nvml_unknown_error_with_openable_nodes_is_not_blamed_on_the_cgroup() -> None:
    """The same NVML text has other causes (a GPU request without the nvidia runtime: pytorch/pytorch#184277)."""
    found = diagnose(layers(nvml_error=NVML_UNKNOWN, device_access={}))
    assert all(f.layer != "devices" for f in found), found
    assert all(f.layer != "devices" for f in diagnose(layers(device_access={"nvidia0": "ENXIO"})))


@pytest.mark.parametrize("caps", ["utility", "gpu,utility", "graphics,video"])
def test_capabilities_without_compute_name_both_sources(caps: str) -> None:
    (first, *_) = [
        f
        for f in diagnose(
            layers(
                libcuda_error="libcuda.so.1: cannot open shared object file",
                driver_cuda=None,
                driver_capabilities=caps,
            )
        )
        if f.layer == "libcuda"
    ]
    assert (
        first.fault_class == "config"
        and f"NVIDIA_DRIVER_CAPABILITIES={caps!r} lacks 'compute'" in first.problem
    )
    assert "capabilities: [gpu, compute, utility]" in first.fix
    assert "-e NVIDIA_DRIVER_CAPABILITIES=compute,utility" in first.fix
    assert "compose's `capabilities:` list" in first.problem


def _bundle(**cuda: object) -> dict[str, object]:
    base = {
        "torch_installed": True,
        "torch_cuda": None,
        "available": False,
        "gpus": [],
        "torch_error": None,
        "visible_devices": None,
        "device_nodes": [],
        "proc_driver": False,
        "proc_driver_version": None,
        "in_container": True,
        "libcuda_error": None,
        "driver_cuda": None,
        "driver_capabilities": None,
    }
    return {"schema": "envcheck-bundle", "schema_version": 1, "cuda": {**base, **cuda}}


@pytest.mark.parametrize(
    "key, value, words",
    [
        ("device_access", ["nvidia0"], "cuda.device_access must be dict or null"),
        ("device_access", {"nvidia0": 1}, "must be dict or null of str to str"),
        ("char_symlinks_missing", "nvidia0", "cuda.char_symlinks_missing must be list or null"),
        ("char_symlinks_missing", [195], "of str"),
    ],
)
def test_malformed_device_keys_are_one_line(key: str, value: object, words: str) -> None:
    with pytest.raises(UsageError) as info:
        validate_bundle(_bundle(**{key: value}))
    assert words in info.value.message and "\n" not in info.value.message
    validate_bundle(_bundle(device_access={"nvidia0": "EPERM"}, char_symlinks_missing=["nvidia0 (195:0)"]))
    validate_bundle(_bundle())  # both keys are optional: bundles of an older envcheck stay readable


def _need_root_and_mknod() -> None:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root (mknod, mount) and unshare for a private /dev")
    probe = subprocess.run(["unshare", "--mount", "true"], capture_output=True, timeout=10)
    if probe.returncode != 0:
        pytest.skip(f"mount namespaces unavailable here: {probe.stderr.decode().strip()}")


def test_missing_dev_char_links_are_listed(tmp_path: Path) -> None:
    """Real character nodes (mknod in a temp dir); the link layout is the one nvidia-ctk creates."""
    _need_root_and_mknod()
    for name, minor in (("nvidia0", 0), ("nvidiactl", 255)):
        os.mknod(tmp_path / name, 0o600 | 0o020000, os.makedev(195, minor))
    (tmp_path / "nvidia-caps").mkdir()  # a directory among the nodes is skipped
    assert missing_char_symlinks(str(tmp_path)) == ["nvidia0 (195:0)", "nvidiactl (195:255)"]
    (tmp_path / "char").mkdir()
    (tmp_path / "char/195:0").symlink_to("../nvidia0")
    (tmp_path / "char/195:255").symlink_to("../nvidia0")  # a link to the wrong node does not count
    assert missing_char_symlinks(str(tmp_path)) == ["nvidiactl (195:255)"]


# A private /dev as GUIDE.md stages it, the NVIDIA nodes bind-mounted from a nodev tmpfs (so only they refuse
# open(), with EACCES), and /run/.containerenv (podman's marker) so envcheck knows it is in a container.
STAGE = """set -e
mount -t tmpfs -o mode=755 tmpfs /dev
for n in "null 1 3" "zero 1 5" "full 1 7" "random 1 8" "urandom 1 9" "tty 5 0"; do set -- $n; mknod -m 666 /dev/$1 c $2 $3; done
ln -s /proc/self/fd /dev/fd; ln -s /proc/self/fd/0 /dev/stdin; ln -s /proc/self/fd/1 /dev/stdout
ln -s /proc/self/fd/2 /dev/stderr; mkdir /dev/shm; mount -t tmpfs tmpfs /dev/shm
mkdir /dev/.staged; mount -t tmpfs -o {opts},mode=755 tmpfs /dev/.staged
for n in "nvidia0 195 0" "nvidiactl 195 255" "nvidia-uvm 195 254"; do set -- $n
  mknod -m 666 /dev/.staged/$1 c $2 $3; touch /dev/$1; mount --bind /dev/.staged/$1 /dev/$1; done
mount -t tmpfs tmpfs /run; touch /run/.containerenv
"""


def _in_staged_dev(
    command: str, opts: str = "nodev", cgroup: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    join = f'echo $$ > "{cgroup}/cgroup.procs"; ' if cgroup else ""
    inner = STAGE.format(opts=opts) + command
    script = f"{join}exec unshare --mount --propagation private sh -c '{inner}'"
    full = {**(env or os.environ), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        ["sh", "-c", script], capture_output=True, text=True, timeout=240, env=full, cwd=ROOT
    )


def _findings(report: str) -> list[dict[str, str]]:
    (result,) = json.loads(report)["results"]
    return list(result["measured"]["findings"])


def test_nodev_nodes_really_refuse_open_and_the_live_check_names_it() -> None:
    _need_root_and_mknod()
    done = _in_staged_dev(f"exec {sys.executable} -m envcheck run --only cuda.available --allow-cpu --json -")
    assert done.returncode == 0, done.stderr
    (result,) = json.loads(done.stdout)["results"]
    assert result["status"] == "warn" and result["fault_class"] == "config"
    devices = _findings(done.stdout)[0]
    assert devices["layer"] == "devices"
    assert devices["problem"].startswith(
        "/dev/nvidia-uvm, /dev/nvidia0, /dev/nvidiactl exist but open() is refused (EACCES"
    )
    assert "/dev is mounted nodev" in devices["problem"] and "this container's user" in devices["problem"]


def test_the_capture_records_each_refused_node() -> None:
    _need_root_and_mknod()
    code = "from envcheck.checks.cuda.capture import device_open_errors as d; import json; print(json.dumps(d()))"
    nodev = _in_staged_dev(f'exec {sys.executable} -c "{code}"')
    assert json.loads(nodev.stdout) == {"nvidia-uvm": "EACCES", "nvidia0": "EACCES", "nvidiactl": "EACCES"}, (
        nodev.stderr
    )
    plain = _in_staged_dev(
        f'exec {sys.executable} -c "{code}"', opts="dev"
    )  # openable nodes, no driver behind
    assert set(json.loads(plain.stdout).values()) == {"ENXIO"}, plain.stderr
    assert device_open_errors("/nonexistent") == {}


@contextmanager
def _device_cgroup_after_reload() -> Iterator[Path]:
    """A cgroup-v1 devices cgroup holding what NVIDIA/nvidia-container-toolkit#251 shows after the reload:
    `c 195:* m` (mknod only), plus the devices any container keeps (1:* mem, 5:* tty, 136:* pts). Removed
    afterwards."""
    root = Path("/sys/fs/cgroup/devices")
    if not (root / "devices.deny").exists():
        pytest.skip("no cgroup-v1 devices controller here (cgroup v2 enforces device rules with eBPF)")
    group = root / f"envcheck-test-{uuid.uuid4().hex[:8]}"
    try:
        group.mkdir()
    except OSError as exc:
        pytest.skip(f"cannot create a devices cgroup here: {exc}")
    try:
        (group / "devices.deny").write_text("a")
        for rule in ("c 1:* rwm", "c 5:* rwm", "c 136:* rwm", "c 195:* m"):
            (group / "devices.allow").write_text(rule)
        yield group
    finally:
        for _ in range(50):  # the members have exited; the kernel may take a moment to drop them
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.1)


def test_a_revoked_device_cgroup_is_eperm_and_replays_from_a_bundle(tmp_path: Path) -> None:
    """The live capture in the staged container, then `envcheck explain` of its bundle outside it."""
    _need_root_and_mknod()
    bundle = tmp_path / "bundle.json"
    with _device_cgroup_after_reload() as group:
        done = _in_staged_dev(
            f"exec {sys.executable} -m envcheck facts --bundle {bundle}", opts="dev", cgroup=group
        )
    assert done.returncode == 0, done.stderr
    cuda = json.loads(bundle.read_text())["cuda"]
    assert cuda["device_access"] == {"nvidia-uvm": "EPERM", "nvidia0": "EPERM", "nvidiactl": "EPERM"}
    assert cuda["in_container"] is True and cuda["char_symlinks_missing"] is None
    replay = run_cli("explain", str(bundle), "--json", "-")
    (available, *_) = json.loads(replay.stdout)["results"]
    assert available["status"] == "fail" and available["fault_class"] == "node"
    assert "open() is refused (EPERM)" in available["summary"] and "daemon-reload" in available["summary"]
    assert "create-dev-char-symlinks --create-all" in available["remediation"]


def test_each_measured_finding_carries_the_code_its_result_has() -> None:
    """A container started without --gpus: the result's code is cuda.container, and so is its finding's in `measured`
    (a JSON report used to show the layer's finding with code "" beside the result's own cuda.container); the
    healthy twin has no findings to disagree with."""
    cuda = {
        "available": False,
        "gpus": [],
        "visible_devices": None,
        **{k: v for k, v in layers(device_nodes=[], proc_driver=False, driver_cuda=None).__dict__.items()},
    }
    result = cuda_available_verdict(cuda, make_context(allow_cpu=True))
    assert result.code == "cuda.container", result
    codes = [f["code"] for f in result.measured["findings"]]
    assert codes[0] == result.code and all(codes), codes
    healthy = cuda_available_verdict(
        {**cuda, "available": True, "gpus": ["NVIDIA H100"], "torch_cuda": "12.8", "nvml_gpus": None},
        make_context(allow_cpu=False),
    )
    assert healthy.status.value == "pass" and "findings" not in healthy.measured
