"""cuda.* checks: real runs on this CPU machine, plus the diagnosis for layers only a GPU host has.

The driver/capability/device-node cases cannot occur without a GPU host, so they feed `diagnose()`
injected layer states (a mocked GPU host, said so here); the CPU-only-torch and CUDA_VISIBLE_DEVICES
cases are also produced for real through the CLI.
"""

from __future__ import annotations

import json

import pytest

from envcheck.checks.cuda.arch import arch_coverage, builds_supporting
from envcheck.checks.cuda.finding import CudaLayers
from envcheck.checks.cuda.layers import diagnose
from envcheck.core.result import Status
from tests.helpers import no_gpu_env, run_check, run_cli

GPU_HOST = dict(
    torch_installed=True,
    torch_cuda="12.8",
    device_nodes=["nvidia0", "nvidiactl"],
    proc_driver=True,
    in_container=True,
    driver_cuda=12080,
    driver_capabilities="compute,utility",
)


def layers(**changes: object) -> CudaLayers:
    return CudaLayers(**{**GPU_HOST, **changes})  # type: ignore[arg-type]


def test_cuda_available_fails_strict_and_warns_with_allow_cpu() -> None:
    """Every GPU is hidden (CUDA_VISIBLE_DEVICES=""), so this holds on a GPU host too."""
    strict = run_check("cuda.available", allow_cpu=False, env=no_gpu_env())
    relaxed = run_check("cuda.available", allow_cpu=True, env=no_gpu_env())
    assert strict.status is Status.FAIL and strict.remediation
    assert relaxed.status is Status.WARN and relaxed.summary.startswith(strict.summary)


def _findings(*args: str, env_extra: dict[str, str] | None = None) -> list[dict[str, str]]:
    import os

    env = {**os.environ, **(env_extra or {})}
    done = run_cli("run", "--only", "cuda.available", "--json", "-", *args, env=env)
    return json.loads(done.stdout)["results"][0]["measured"]["findings"]  # type: ignore[no-any-return]


def test_cpu_only_torch_is_named_with_its_fix() -> None:
    import torch

    if torch.version.cuda is not None:
        pytest.skip("this venv has a CUDA torch; the CPU-only case is covered by the diagnosis unit test")
    import os

    if os.path.isdir("/proc/driver/nvidia") or any(n.startswith("nvidia") for n in os.listdir("/dev")):
        pytest.skip("this host has an NVIDIA driver; the GPU-host case is the diagnosis unit test below")
    (torch_finding,) = [f for f in _findings() if f["layer"] == "torch"]
    # A CPU-only torch on a host with no GPU is what the install is, not something to reinstall.
    assert "CPU is what this install is" in torch_finding["problem"], torch_finding
    assert "pip install" not in torch_finding["fix"] and "--allow-cpu" in torch_finding["fix"]


def test_empty_cuda_visible_devices_is_named() -> None:
    found = _findings(env_extra={"CUDA_VISIBLE_DEVICES": ""})
    (cvd,) = [f for f in found if f["layer"] == "CUDA_VISIBLE_DEVICES"]
    assert "empty" in cvd["problem"] and "unset CUDA_VISIBLE_DEVICES" in cvd["fix"]


def test_healthy_mocked_gpu_host_has_no_known_finding() -> None:
    (only,) = diagnose(layers(torch_error="some unknown failure"))
    assert only.layer == "unknown" and "some unknown failure" in only.problem


@pytest.mark.parametrize(
    "changes, layer, problem, fix",
    [
        (dict(device_nodes=[], proc_driver=False), "container", "without GPU access", "--gpus all"),
        (
            dict(device_nodes=[], proc_driver=False, in_container=False),
            "driver",
            "no NVIDIA driver",
            "install",
        ),
        (
            dict(libcuda_error="libcuda.so.1: cannot open", driver_cuda=None, driver_capabilities="utility"),
            "libcuda",
            "lacks 'compute'",
            "NVIDIA_DRIVER_CAPABILITIES=compute,utility",
        ),
        (
            dict(driver_cuda=11080),
            "driver",
            "driver supports CUDA 11.8, but torch was built for CUDA 12.8",
            ">= 525.60.13",
        ),  # an older major; a lower minor of 12 is minor-version compatible (test_driver_rule.py)
        (dict(driver_cuda=12080, torch_cuda="13.0"), "driver", "supports CUDA 12.8", "-cuda12.x"),
        (dict(visible_devices="-1"), "CUDA_VISIBLE_DEVICES", "the usual way to ask for none", "unset"),
        (dict(visible_devices="0,0"), "CUDA_VISIBLE_DEVICES", "names 0 more than once", "unset"),
        (dict(visible_devices="3"), "CUDA_VISIBLE_DEVICES", "only 1 exist", "unset"),
        (
            dict(torch_cuda=None),
            "torch",
            "CPU-only build (torch.version.cuda is None) on a host with an NVIDIA GPU",
            "download.pytorch.org/whl/cu",
        ),
    ],
)
def test_each_broken_layer_is_named_with_its_fix(
    changes: dict[str, object], layer: str, problem: str, fix: str
) -> None:
    found = {f.layer: f for f in diagnose(layers(**changes))}
    assert layer in found, found
    assert problem in found[layer].problem and fix in found[layer].fix


def test_valid_visible_devices_are_not_flagged() -> None:
    assert diagnose(layers(visible_devices="0"))[0].layer == "unknown"
    assert diagnose(layers(visible_devices="GPU-1234-abcd"))[0].layer == "unknown"


@pytest.mark.parametrize(
    "cap, arch_list, covered",
    [
        ((9, 0), ["sm_80", "sm_90"], "sm_90 SASS"),
        ((8, 6), ["sm_80"], "sm_80 SASS"),
        ((8, 9), ["sm_90"], None),
        ((12, 0), ["sm_80", "sm_90", "compute_90"], "compute_90 PTX"),
        ((9, 0), ["sm_90a"], "sm_90a SASS"),
        ((10, 0), ["sm_90a"], None),
        ((7, 0), ["sm_75", "sm_80"], None),
        # family-specific (f) code stays within its major family; arch-specific (a) on exactly its arch
        ((12, 0), ["sm_90", "compute_100f"], None),
        ((12, 0), ["sm_100f"], None),
        ((12, 0), ["compute_100a"], None),
        ((10, 3), ["sm_100f"], "sm_100f SASS"),
        ((10, 3), ["compute_100f"], "compute_100f PTX"),
        ((10, 3), ["sm_100a", "compute_100a"], None),
        ((10, 0), ["compute_100a"], "compute_100a PTX"),
        ((10, 0), ["compute_103f"], None),
        ((12, 1), ["sm_120"], "sm_120 SASS"),
        ((12, 1), ["compute_90"], "compute_90 PTX"),
        ((11, 0), ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"], None),  # torch 2.11 cu130 x86_64
    ],
)
def test_arch_coverage(cap: tuple[int, int], arch_list: list[str], covered: str | None) -> None:
    how = arch_coverage(cap, arch_list)
    assert (how is None) if covered is None else (how is not None and how.startswith(covered))


@pytest.mark.parametrize(
    "cap, cuda, index",
    [
        ((10, 0), "CUDA >= 12.8", "whl/cu128"),  # B200
        ((10, 3), "CUDA >= 12.9", "whl/cu129"),  # B300 / GB300
        ((11, 0), "CUDA >= 13.0", "whl/cu130"),  # Jetson Thor (sm_101 in CUDA 12.9)
        ((12, 0), "CUDA >= 12.8", "whl/cu128"),  # RTX 50xx, RTX PRO Blackwell
        ((12, 1), "CUDA >= 12.9", "whl/cu129"),  # DGX Spark GB10
        ((9, 0), "CUDA >= 11.8", "whl/cu128"),
        ((7, 0), "CUDA <= 12.9", None),
    ],
)
def test_builds_supporting_names_the_first_cuda_release_and_a_wheel_index(
    cap: tuple[int, int], cuda: str, index: str | None
) -> None:
    said = builds_supporting(cap)
    assert cuda in said and (index is None or index in said), said
    if cap == (11, 0):
        assert "aarch64" in said


def test_expect_gpus_mismatch_fails() -> None:
    """Every GPU is hidden (CUDA_VISIBLE_DEVICES=""), so this holds on a GPU host too."""
    result = run_check("cuda.devices", expect_gpus=2, env=no_gpu_env())
    assert result.status is Status.FAIL and "0 GPU(s) visible, 2 expected" in result.summary


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["cuda.available", "cuda.arch", "cuda.devices", "cudnn.conv", "vision.ops"])
def test_gpu_checks_pass_on_a_healthy_gpu(name: str) -> None:
    import importlib.util

    if name == "vision.ops" and importlib.util.find_spec("torchvision") is None:
        pytest.skip(
            "torchvision is not installed in this venv (vision.ops would rightly fail: see test_vision)"
        )
    result = run_check(name, allow_cpu=False)
    assert result.status in (Status.PASS, Status.WARN), result


# ---- a mocked GPU host: torch.cuda is patched in-process (no GPU here), said so in each test ----

BUSY = (
    "CUDA error: CUDA-capable device(s) is/are busy or unavailable\nCUDA kernel errors might be "
    "asynchronously reported at some other API call, so the stacktrace below might be incorrect."
)


def _fake_gpu(monkeypatch: pytest.MonkeyPatch, kernel_error: str | None = None) -> None:
    """One fake H100 (sm_90): properties readable, kernels on cuda:0 raise `kernel_error`."""
    import types

    import torch

    props = types.SimpleNamespace(
        name="NVIDIA H100 80GB HBM3",
        uuid="6f1c2d3e-0000-1111-2222-333344445555",
        pci_bus_id=0x19,
        pci_domain_id=0,
        pci_device_id=0,
        major=9,
        minor=0,
    )
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_arch_list", lambda: ["sm_80", "sm_90"])
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i=0: (9, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: props.name)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i=0: props)
    real_arange = torch.arange

    def arange(*a: object, **kw: object) -> object:
        if str(kw.get("device", "cpu")).startswith("cuda") and kernel_error:
            raise (
                torch.AcceleratorError(kernel_error)
                if hasattr(torch, "AcceleratorError")
                else RuntimeError(kernel_error)
            )
        return real_arange(*a, **kw)  # type: ignore[call-overload]

    monkeypatch.setattr(torch, "arange", arange)


def test_busy_exclusive_gpu_is_named_with_its_compute_mode_and_fix() -> None:
    """Real text of cudaErrorDevicesUnavailable (46); NVML's compute modes are injected (no GPU here)."""
    from envcheck.checks.cuda.live_errors import busy_gpu_finding

    found = busy_gpu_finding(
        BUSY, "GPU 0 (NVIDIA H100)", modes=lambda: {0: "EXCLUSIVE_PROCESS", 1: "DEFAULT"}
    )
    assert found is not None and found.layer == "gpu"
    assert "GPU 0 (NVIDIA H100) is busy or unavailable" in found.problem
    assert "GPU 0: EXCLUSIVE_PROCESS" in found.problem and "another process already holds it" in found.problem
    assert "nvidia-smi -i <index> -c DEFAULT" in found.fix and "wait for the other job" in found.fix
    assert (
        found.fault_class == "config" and found.code == "cuda.gpu_busy"
    )  # another job's GPU: never a node fault
    unknown = busy_gpu_finding(BUSY, None, modes=lambda: "compute mode unknown (NVML unavailable: x)")
    assert (
        unknown is not None and "compute mode unknown" in unknown.problem and unknown.fault_class == "config"
    )
    assert busy_gpu_finding("CUDA error: out of memory", None, modes=lambda: {}) is None


def test_a_gpu_that_refuses_contexts_in_default_mode_is_the_nodes() -> None:
    """The broken twin: cudaErrorDevicesUnavailable while NVML shows every GPU in DEFAULT compute mode: nothing
    holds it exclusively, so the GPU itself refuses."""
    from envcheck.checks.cuda.live_errors import busy_gpu_finding

    found = busy_gpu_finding(BUSY, "GPU 1", modes=lambda: {0: "DEFAULT", 1: "DEFAULT"})
    assert found is not None and found.fault_class == "node" and found.code == "cuda.gpu_unusable"
    assert "the GPU itself refuses contexts" in found.problem and "nvidia-smi -r -i <index>" in found.fix


def test_a_busy_gpu_crash_fails_naming_the_gpu_not_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mocked GPU: the test kernel raises the real busy text; NVML reports EXCLUSIVE_PROCESS (injected)."""
    from envcheck.checks.cuda import live_errors as cuda_diagnosis

    _fake_gpu(monkeypatch, BUSY)
    monkeypatch.setattr(cuda_diagnosis, "compute_modes", lambda: {0: "EXCLUSIVE_PROCESS"})
    result = run_check("cuda.arch", isolated=False)
    assert result.status is Status.FAIL, result
    assert result.summary.startswith(
        "GPU 0 (NVIDIA H100 80GB HBM3, UUID 6f1c2d3e-0000-1111-2222-333344445555, "
        "PCI 00000000:19:00.0) is busy or unavailable"
    )
    assert "EXCLUSIVE_PROCESS" in result.summary and "-c DEFAULT" in (result.remediation or "")


def test_a_sticky_error_on_one_gpu_names_it() -> None:
    """No GPU: gpu_error() is fed the real text of cudaErrorIllegalAddress for a GPU whose properties fail."""
    from envcheck.checks.cuda.live_errors import gpu_error, sticky_cuda_error

    text = "CUDA error: an illegal memory access was encountered"
    assert sticky_cuda_error(text) and sticky_cuda_error("CUDA error: unspecified launch failure")
    assert not sticky_cuda_error("CUDA error: out of memory")
    found = gpu_error(3, RuntimeError(text), "a test kernel failed")
    assert found.problem.startswith("GPU 3 (") and "illegal memory access" in found.problem
    assert "restarts the worker" in found.problem and "Xid" in found.fix


def test_cuda_arch_kernel_failure_names_the_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mocked GPU (see _fake_gpu): an illegal address in the test kernel is a FAIL naming index, UUID, PCI."""
    _fake_gpu(monkeypatch, "CUDA error: an illegal memory access was encountered")
    result = run_check("cuda.arch", isolated=False)
    assert result.status is Status.FAIL, result
    assert (
        "GPU 0 (NVIDIA H100 80GB HBM3, UUID 6f1c2d3e-0000-1111-2222-333344445555, PCI 00000000:19:00.0)"
        in result.summary
    )
    assert "illegal memory access" in result.summary


CUDNN_MISMATCH = (
    "cuDNN version incompatibility: PyTorch was compiled  against (9, 10, 2) but found runtime "
    "version (9, 1, 0). PyTorch already comes bundled with cuDNN. One option to resolving this error "
    "is to ensure PyTorch can find the bundled cuDNN. one possibility is that there is a conflicting "
    "cuDNN in LD_LIBRARY_PATH."
)
CUDNN_OLD_GPU = (
    "cuDNN version 91100 is not compatible with devices with SM < 7.5. Please install a version of "
    "PyTorch with a compatible cuDNN version. "
    "https://github.com/pytorch/pytorch/blob/main/RELEASE.md#release-compatibility-matrix"
)


@pytest.mark.parametrize(
    "message, summary, fix",
    [
        (
            CUDNN_MISMATCH,
            "cuDNN version mismatch: torch was built with cuDNN 9.10.2",
            "pip install nvidia-cudnn-cu12==9.10.2.21",
        ),
        (CUDNN_OLD_GPU, "cuDNN refuses this GPU: cuDNN version 91100 is not compatible", "older than sm_75"),
    ],
)
def test_cudnn_version_raising_fails_with_the_fix(
    monkeypatch: pytest.MonkeyPatch, message: str, summary: str, fix: str
) -> None:
    """No GPU: torch.backends.cudnn.version() is patched to raise torch's real messages (backends/cudnn/_init)."""
    import types

    import torch

    from envcheck.checks import cudnn

    def raises() -> int:
        raise RuntimeError(message)

    monkeypatch.setattr(torch.backends.cudnn, "version", raises)
    monkeypatch.setattr(
        torch._C, "_cudnn", types.SimpleNamespace(getCompileVersion=lambda: (9, 10, 2)), raising=False
    )
    monkeypatch.setattr(cudnn, "cudnn_pin", lambda: "nvidia-cudnn-cu12==9.10.2.21")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    result = run_check("cudnn.conv", isolated=False)
    assert result.status is Status.FAIL, result
    assert result.summary.startswith(summary) and fix in (result.remediation or "")


def test_cudnn_pin_is_read_from_torch_requirements() -> None:
    from envcheck.checks.cudnn import cudnn_pin

    reqs = ["filelock", 'nvidia-cudnn-cu12==9.10.2.21; platform_system == "Linux"']
    assert cudnn_pin(reqs) == "nvidia-cudnn-cu12==9.10.2.21"
    assert cudnn_pin(["filelock"]) is None
