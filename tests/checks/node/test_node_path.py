"""The torch-free node path: node.cuda_driver through the CUDA driver API in a budgeted child.

Simulated, and only that: libcuda.so.1 (a stand-in built from C, tests/staging/libcuda.py: no NVIDIA driver can
exist here), and a driver call stuck in the kernel (the stand-in's cuInit vfork()s, so the kernel really holds the
caller in D state). Real: the child process, ctypes, the dynamic loader (LD_LIBRARY_PATH), the budget, the kill,
/proc state and wchan, and the CLI run as a Slurm prolog would run it, with a `torch` on PYTHONPATH that raises if
anything imports it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from envcheck.checks.node.driver_api import verdict
from envcheck.core.result import Status
from envcheck.probe.cuda_driver import probe
from tests.helpers import ROOT
from tests.staging.libcuda import build


@pytest.fixture(scope="module")
def libdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("libcuda"))


def env(libdir: Path, **case: str) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith(("STUB_", "SLURM"))}
    return {**out, "LD_LIBRARY_PATH": str(libdir), **case}


def test_a_healthy_node_passes_with_a_context_and_a_verified_copy_per_gpu(libdir: Path) -> None:
    got = verdict(probe(10, env(libdir, STUB_COUNT="2")))
    assert got.status is Status.PASS, got.summary
    assert (
        got.summary.startswith("2 GPU(s) take a context and a 1 MiB copy")
        and "driver CUDA 13.0" in got.summary
    )
    gpus = got.measured["gpus"]
    assert [g["pci"] for g in gpus] == ["00000000:18:00.0", "00000000:2A:00.0"]
    assert all(g["copy"] == {"bytes": 1 << 20, "wrong": 0} for g in gpus)


def test_cuinit_802_names_the_fabric_manager(libdir: Path) -> None:
    """cuInit's CUDA_ERROR_SYSTEM_NOT_READY on NVSwitch systems without nvidia-fabricmanager (jax-ml/jax#34113:
    "cuInit(0) ... failing with CUDA_ERROR_SYSTEM_NOT_READY"; aws-samples/aws-deep-learning-ami-ubuntu-dcv-desktop#33:
    "on A100, H100, H200 and B200 instances, CUDA initialization fails with 802 system error")."""
    got = verdict(probe(10, env(libdir, STUB_INIT="802")))
    assert got.status is Status.FAIL and got.code == "cuda.error.802" and got.fault_class is not None
    assert got.fault_class.value == "node"
    assert got.summary.startswith("cuInit returned CUDA_ERROR_SYSTEM_NOT_READY (802)")
    assert "nvidia-fabricmanager" in (got.remediation or "")


def test_a_hung_cuinit_is_evidence_with_state_and_wchan_within_its_budget(libdir: Path) -> None:
    began = time.monotonic()
    got = verdict(probe(1.0, env(libdir, STUB_HANG_INIT="1")))
    assert time.monotonic() - began < 4
    assert got.status is Status.FAIL and got.code == "cuda.init_hang" and got.fault_class is not None
    assert got.fault_class.value == "node"
    hang = got.measured["hang"]
    assert hang["call"] == "cuInit" and hang["budget_s"] == 1.0 and hang["state"] == "D" and hang.get("wchan")
    assert got.summary.startswith(
        "the CUDA driver hangs: cuInit did not return within 1 s (uninterruptible sleep"
    )


def test_a_gpu_that_refuses_a_context_is_named_with_its_pci_address(libdir: Path) -> None:
    got = verdict(probe(10, env(libdir, STUB_COUNT="4", STUB_CTX_FAIL_GPU="3", STUB_CTX_FAIL_CODE="214")))
    assert got.status is Status.FAIL and got.code == "cuda.gpu_unusable"
    assert got.summary == (
        "GPU 3 (NVIDIA H100 80GB HBM3, 00000000:5D:00.0): cuCtxCreate_v2 returned "
        "CUDA_ERROR_ECC_UNCORRECTABLE (214)"
    )
    assert "nvidia-smi -r -i 3" in (got.remediation or "")


def test_a_copy_that_comes_back_wrong_names_the_gpu(libdir: Path) -> None:
    got = verdict(probe(10, env(libdir, STUB_COUNT="2", STUB_CORRUPT_GPU="1")))
    assert got.status is Status.FAIL and got.code == "cuda.copy_mismatch"
    assert (
        got.summary.startswith("GPU 1 (NVIDIA H100 80GB HBM3, 00000000:2A:00.0): a 1 MiB copy")
        and "1 wrong" in got.summary
    )


def test_a_loaded_kernel_module_without_libcuda_is_named(tmp_path: Path) -> None:
    """Real: this host has no libcuda.so.1, so the dynamic loader's own error comes back; the /dev nodes of a host
    whose kernel module is loaded are staged in the data (they cannot exist here)."""
    data = probe(10, env(tmp_path))
    assert (
        data["done"]["libcuda"] is None
        and "libcuda.so.1: cannot open shared object file" in data["done"]["dlopen_error"]
    )
    assert verdict(data).status is Status.SKIP  # no driver at all: nothing to judge
    got = verdict({**data, "dev": ["nvidia0", "nvidiactl"]})
    assert got.status is Status.FAIL and got.code == "cuda.libcuda_missing"


def run_prolog(libdir: Path, tmp_path: Path, *extra: str, **case: str) -> subprocess.CompletedProcess[str]:
    poison = tmp_path / "poison"
    (poison / "torch").mkdir(parents=True)
    (poison / "torch" / "__init__.py").write_text("raise ImportError('torch imported on the node path')\n")
    run_env = env(libdir, **case)
    run_env["PYTHONPATH"] = os.pathsep.join([str(poison), str(ROOT)])
    return subprocess.run(
        [sys.executable, "-m", "envcheck", "run", "--for", "prolog", "--json", "-", *extra],
        capture_output=True,
        text=True,
        timeout=60,
        env=run_env,
        cwd=tmp_path,
    )


def test_the_prolog_runs_without_importing_torch(libdir: Path, tmp_path: Path) -> None:
    done = run_prolog(libdir, tmp_path, STUB_COUNT="2")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["facts"]["envcheck"] == {"path": "node (torch-free)", "torch_imported": False}
    by_name = {r["name"]: r for r in report["results"]}
    assert list(by_name) == ["node.cuda_driver", "gpu.health", "dcgm.health", "dcgm.diag", "node.profile"]
    assert by_name["node.cuda_driver"]["status"] == "pass"


def test_a_prolog_on_a_node_without_fabric_manager_fails_the_node(libdir: Path, tmp_path: Path) -> None:
    done = run_prolog(libdir, tmp_path, STUB_INIT="802")
    assert done.returncode == 1, done.stderr
    assert "[node] node.cuda_driver: cuInit returned CUDA_ERROR_SYSTEM_NOT_READY (802)" in done.stderr
    assert json.loads(done.stdout)["facts"]["envcheck"]["torch_imported"] is False


def test_the_torch_checks_stay_available_by_name(libdir: Path, tmp_path: Path) -> None:
    """--only with a torch check leaves the node path: the poisoned torch is imported, and says so."""
    done = run_prolog(libdir, tmp_path, "--only", "container.shm")
    assert "torch imported on the node path" in done.stdout + done.stderr


def test_a_second_nvml_reader_does_not_wait_again_behind_a_hung_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Simulated NVML (the one NVML fake): nvmlInit blocks. gpu.health and node.profile both read NVML on the node
    path: the second answers at once with the first one's evidence instead of spending another budget."""
    from envcheck.probe.nvml import read_nvml
    from tests.staging import nvml

    nvml.install(monkeypatch, tmp_path, nvml.state(nvml.gpu(0), init_hang="S", init_hang_s=3))
    first = read_nvml(lambda pynvml, progress: None, lambda exc: None, budget_s=0.3)
    began = time.monotonic()
    second = read_nvml(lambda pynvml, progress: None, lambda exc: None, budget_s=5)
    assert first.hang is not None and second.hang is not None and second.hang.get("earlier") is True
    assert time.monotonic() - began < 0.2


def _refused(code: int, name: str) -> dict[str, object]:
    return {
        "dev": ["nvidia0", "nvidiactl"],
        "done": {
            "libcuda": "libcuda.so.1",
            "driver_cuda": 13000,
            "count": 1,
            "gpus": [
                {
                    "index": 0,
                    "pci": "00000000:18:00.0",
                    "error": {"call": "cuCtxCreate_v2", "code": code, "name": name},
                }
            ],
        },
    }


@pytest.mark.parametrize(
    "usage, status, code",
    [
        (
            {"0000:18:00": {"processes": [{"pid": 4242, "used_mib": 79000, "name": "python"}]}},
            Status.PASS,
            None,
        ),
        ({"0000:18:00": {"memory": {"total_mib": 81559, "used_mib": 80000}}}, Status.PASS, None),
        ({"0000:18:00": {"compute_mode": "EXCLUSIVE_PROCESS"}}, Status.PASS, None),
        (
            {
                "0000:18:00": {
                    "processes": [],
                    "memory": {"total_mib": 81559, "used_mib": 300},
                    "compute_mode": "DEFAULT",
                }
            },
            Status.FAIL,
            "cuda.gpu_unusable",
        ),
        ("NVML: NVML Shared Library Not Found", Status.WARN, None),
    ],
)
def test_a_refused_context_is_busy_only_with_evidence_of_a_holder(
    usage: object, status: Status, code: str | None
) -> None:
    """CUDA_ERROR_DEVICES_UNAVAILABLE (46) on a GPU in EXCLUSIVE_PROCESS mode, OUT_OF_MEMORY on a GPU whose
    memory a job holds: busy, not broken. The same code on an idle GPU in DEFAULT mode is the node's; with no NVML
    to ask, a warning that says so (never a drain on a guess)."""
    got = verdict({**_refused(46, "CUDA_ERROR_DEVICES_UNAVAILABLE"), "usage": usage})
    assert got.status is status and got.code == code, got.summary
    if status is Status.PASS:
        assert "held by" in got.summary and got.measured["busy"]


# What the process's configuration explains when CUDA sees no device (checks/node/config_causes.py), each beside its
# healthy twin; the real child and the stand-in libcuda, which applies CUDA_VISIBLE_DEVICES as CUDA does (read up to
# the first bad entry; a repeat leaves none) and then returns CUDA_ERROR_NO_DEVICE from cuInit.
HOST_ACCESS = {"device_nodes": {"0": "ok", "1": "ok"}, "in_container": False}


@pytest.mark.parametrize(
    "visible, code",
    [
        ("0,0", "cuda.visible_devices"),
        ("GPU-6f1c2a9e", "cuda.visible_devices"),
        ("7", "cuda.visible_devices"),
        ("0,1", None),
    ],
    ids=["a repeat", "another host's UUID", "an index past the GPUs", "valid: its healthy twin"],
)
def test_cuda_visible_devices_that_hides_every_gpu_is_config_never_the_node(
    libdir: Path, visible: str, code: str | None
) -> None:
    data = probe(10, env(libdir, STUB_COUNT="2", CUDA_VISIBLE_DEVICES=visible))
    got = verdict({**data, "access": {**HOST_ACCESS, "cuda_visible_devices": visible}})
    if code is None:
        assert got.status is Status.PASS, got.summary
        return
    assert got.status is Status.FAIL and got.code == code and got.fault_class == "config", got.summary
    assert "CUDA_VISIBLE_DEVICES" in got.summary and "unset CUDA_VISIBLE_DEVICES" in (got.remediation or "")


def test_no_device_with_nothing_to_explain_it_keeps_the_tables_class(libdir: Path) -> None:
    """cuInit's CUDA_ERROR_NO_DEVICE with no variable, no MIG, the device nodes there: the CUDA error table's class
    for 100 (config), and the text says what was ruled out; never the node by default."""
    got = verdict({**probe(10, env(libdir, STUB_COUNT="2", STUB_INIT="100")), "access": HOST_ACCESS})
    assert got.code == "cuda.error.100" and got.fault_class == "config"
    assert "checked: no CUDA_VISIBLE_DEVICES" in got.summary


def test_mig_enabled_without_an_instance_names_mig_and_its_command(libdir: Path) -> None:
    nvml = [{"index": i, "uuid": f"GPU-{i}", "mig": True, "mig_devices": []} for i in range(2)]
    got = verdict({**probe(10, env(libdir, STUB_COUNT="0")), "access": HOST_ACCESS, "nvml": nvml})
    assert got.code == "gpu.mig_no_instance" and got.fault_class == "node", got.summary
    assert "nvidia-smi mig -i 0 -cgi" in (got.remediation or "")
    unknown = [
        {
            "index": 0,
            "uuid": "GPU-0",
            "mig": True,
            "mig_error": "nvmlDeviceGetMigDeviceHandleByIndex: GPU is lost",
        }
    ]
    twin = verdict({**probe(10, env(libdir, STUB_COUNT="0")), "access": HOST_ACCESS, "nvml": unknown})
    assert twin.code != "gpu.mig_no_instance"  # a MIG list NVML could not read is not "no instance"


def test_a_container_without_compute_capability_is_config(libdir: Path) -> None:
    access = {"device_nodes": {"0": "ok"}, "in_container": True, "driver_capabilities": "utility"}
    no_libcuda = {
        **probe(10, {**env(libdir), "LD_LIBRARY_PATH": "/nonexistent"}),
        "dev": ["nvidia0", "nvidiactl"],
    }
    without = verdict(
        {**no_libcuda, "access": access}
    )  # the toolkit gave nvidia0 and nvidiactl, no uvm, no libcuda
    assert without.code == "cuda.capabilities" and without.fault_class == "config", without.summary
    host = verdict({**no_libcuda, "access": HOST_ACCESS})
    assert (
        host.code == "cuda.libcuda_missing" and host.fault_class == "node"
    )  # on a host: the driver's install
