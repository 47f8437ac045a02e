"""CUDA init errors by code, replayed from bundles that carry the real texts users posted.

Simulated: each case is the real healthy H100 bundle (tests/checks/fixtures, from the proof run) with the
layers of the failing host staged in it (torch's warning text quoted from the cited issue, cuInit's result,
/proc/driver/nvidia/version, the mapped libraries, the /dev nodes). The diagnosis then runs exactly as
`envcheck explain` runs it. No GPU, driver or libcuda is involved; the capture side is tested in
tests/evidence/test_bundle.py and test_cuda_codes_capture below (a stub libcuda compiled from C).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from envcheck.core.check import Context
from envcheck.evidence.bundle import validate_bundle
from envcheck.evidence.replay import explain_bundle
from tests.helpers import HEALTHY_H100, ROOT

_PREFIX = (
    "CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before "
    "calling NumCudaDevices() that might have already set an error? "
)
# https://github.com/hiyouga/LlamaFactory/issues/7888 (torch 2.7.0+cu126)
E802 = _PREFIX + (
    "Error 802: system not yet initialized (Triggered internally at /pytorch/c10/cuda/CUDAFunctions.cpp:109.)"
)
# https://github.com/easydiffusion/easydiffusion/issues/379
E803 = _PREFIX + (
    "Error 803: system has unsupported display driver / cuda driver combination (Triggered internally "
    "at  /opt/conda/conda-bld/pytorch_1646755903507/work/c10/cuda/CUDAFunctions.cpp:112.)"
)
# https://github.com/PKU-YuanGroup/Video-LLaVA/issues/22
E804 = _PREFIX + (
    "Error 804: forward compatibility was attempted on non supported HW (Triggered internally at "
    "../c10/cuda/CUDAFunctions.cpp:109.)"
)
# https://github.com/pytorch/pytorch/issues/88639 (torch words cudaErrorUnknown = 999, after suspend/resume)
E999 = (
    "CUDA initialization: CUDA unknown error - this may be due to an incorrectly set up environment, e.g. "
    "changing env variable CUDA_VISIBLE_DEVICES after program start. Setting the available devices to be zero. "
    "(Triggered internally at ../c10/cuda/CUDAFunctions.cpp:109.)"
)
# https://github.com/IEIT-Yuan/Yuan-2.0/issues/65 (torch words cudaErrorInsufficientDriver = 35)
E35 = (
    "CUDA initialization: The NVIDIA driver on your system is too old (found version 11000). Please update your "
    "GPU driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx"
    " Alternatively, go to: https://pytorch.org to install a PyTorch version that has been compiled with your "
    "version of the CUDA driver. (Triggered internally at /opt/pytorch/pytorch/c10/cuda/CUDAFunctions.cpp:108.)"
)
# /proc/driver/nvidia/version as the driver writes it (format of the 580 series; version staged per case)
PROC_VERSION = (
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {v}  Release Build  (dvs-builder@U16-I3-B03-4-3)"
    "  Thu Oct 30 08:11:41 UTC 2025\nGCC version:  gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04)"
)
LIBCUDA = "/usr/lib/x86_64-linux-gnu/libcuda.so.{v}"


def _replay(**cuda: Any) -> list[Any]:
    bundle = json.loads(HEALTHY_H100.read_text())
    bundle["cuda"].update(available=False, gpus=[], **cuda)
    return explain_bundle(validate_bundle(bundle), Context())[0].measured["findings"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    "text, problem, fix, fault",
    [
        (
            E802,
            "NVLink fabric registration is not complete",
            "systemctl enable --now nvidia-fabricmanager",
            "node",
        ),
        (E803, "the libcuda in use is not the kernel driver's", "/proc/driver/nvidia/version", "node"),
        (E804, "a cuda-compat libcuda is in use", "drop the forward-compat libcuda", "image"),
    ],
)
def test_cuda_init_error_codes_name_their_cause(text: str, problem: str, fix: str, fault: str) -> None:
    found = _replay(torch_error=text)
    assert found[0]["layer"] == "cuda-init", found
    assert problem in found[0]["problem"] and fix in found[0]["fix"] and found[0]["fault_class"] == fault
    assert all(f["layer"] != "unknown" for f in found)


def test_999_names_a_driver_upgraded_without_reboot() -> None:
    """Staged: kernel module 580.95.05 loaded, libcuda 580.159.04 mapped (an upgrade without reboot)."""
    found = _replay(
        torch_error=E999,
        proc_driver_version=PROC_VERSION.format(v="580.95.05"),
        libraries=[LIBCUDA.format(v="580.159.04")],
    )
    assert found[0]["layer"] == "cuda-init" and found[0]["fault_class"] == "node"
    assert (
        "kernel module is 580.95.05" in found[0]["problem"] and "libcuda is 580.159.04" in found[0]["problem"]
    )
    assert "reboot" in found[0]["fix"]


# The kernel's module list decides whether nvidia_uvm is loaded; the missing node alone does not ("It's possible nvidia-uvm is
# not created by just loading the module", google/go-tpm-tools#925; bvaisvil/zenith#79: /dev/nvidia-uvm "is sometimes
# not present if no app has been used that uses those APIs").
UVM_LOADED = {"nvidia": "Live", "nvidia_uvm": "Live"}


@pytest.mark.parametrize(
    "modules, contained, words, fix, fault",
    [
        (
            {"nvidia": "Live"},
            False,
            "the kernel lists no nvidia_uvm module: it is not loaded",
            "modprobe",
            "node",
        ),
        (
            UVM_LOADED,
            False,
            "lists nvidia_uvm as loaded: the device node was never created",
            "nvidia-modprobe -u",
            "node",
        ),
        (
            UVM_LOADED,
            True,
            "lists nvidia_uvm as loaded: this container was not given it",
            "compute",
            "config",
        ),
        (
            "neither /sys/module nor /proc/modules cannot be read",
            False,
            "whether nvidia_uvm is loaded was not read",
            "lsmod",
            "node",
        ),
    ],
)
def test_999_names_a_missing_nvidia_uvm_by_what_the_kernel_lists(
    modules: object, contained: bool, words: str, fix: str, fault: str
) -> None:
    """Staged: versions agree, /dev/nvidia-uvm is absent; the kernel's module list says why."""
    found = _replay(
        torch_error=E999,
        device_nodes=["nvidia0", "nvidiactl"],
        proc_driver_version=PROC_VERSION.format(v="580.159.04"),
        libraries=[LIBCUDA.format(v="580.159.04")],
        kernel_modules=modules,
        in_container=contained,
    )
    assert "/dev/nvidia-uvm is missing" in found[0]["problem"] and words in found[0]["problem"]
    assert fix in found[0]["fix"] and found[0]["fault_class"] == fault


# https://github.com/JosephKJ/OWOD/issues/81: nvidia-smi "Unable to determine the device handle for GPU
# 0000:02:00.0: GPU is lost. Reboot the system to recover this GPU" (NVML_ERROR_GPU_IS_LOST, whose text is this).
def test_999_names_a_gpu_fallen_off_the_bus() -> None:
    """Staged: NVML's handle for GPU 0 fails with 'GPU is lost' (pynvml's NVMLError_GPUIsLost text)."""
    found = _replay(
        torch_error=E999,
        nvml_error="GPU 0: GPU is lost",
        proc_driver_version=PROC_VERSION.format(v="580.159.04"),
        libraries=[LIBCUDA.format(v="580.159.04")],
    )
    assert (
        "NVML reports GPU 0: GPU is lost" in found[0]["problem"]
        and "fallen off the bus" in found[0]["problem"]
    )
    assert "reboot" in found[0]["fix"] and found[0]["fault_class"] == "node"


def test_999_with_no_cause_found_says_what_was_ruled_out() -> None:
    found = _replay(
        torch_error=E999,
        proc_driver_version=PROC_VERSION.format(v="580.159.04"),
        libraries=[LIBCUDA.format(v="580.159.04")],
    )
    assert "likely wedged (after suspend/resume" in found[0]["problem"]
    assert (
        "ruled out: a GPU lost in NVML, kernel module vs libcuda version, /dev/nvidia-uvm present"
        in found[0]["problem"]
    )


def test_35_in_torchs_words_names_the_driver() -> None:
    """Staged: driver reports CUDA 11.0 (11000, as in the cited text) under a CUDA 13.0 torch."""
    found = _replay(torch_error=E35, driver_cuda=11000)
    assert found[0]["layer"] == "driver" and found[0]["fault_class"] == "node", found
    assert "supports CUDA 11.0, but torch was built for CUDA 13.0" in found[0]["problem"]
    assert not any(f["layer"] == "cuda-init" for f in found)  # one cause, named once


def test_35_without_a_readable_driver_version_is_still_named() -> None:
    found = _replay(torch_error=E35, driver_cuda=None)
    assert found[0]["problem"].startswith("CUDA error 35") and found[0]["fault_class"] == "node"


# https://github.com/Theano/libgpuarray/issues/551: "cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is
# detected" (torch itself stays silent on cudaErrorNoDevice: it reports zero devices), so 100 comes from cuInit.
def test_100_from_cuinit_names_hidden_gpus() -> None:
    found = _replay(torch_error=None, cu_init=100)
    assert found[0]["layer"] == "cuda-init" and found[0]["fault_class"] == "config"
    assert "every GPU is hidden" in found[0]["problem"] and "NVIDIA_VISIBLE_DEVICES" in found[0]["fix"]


STUB = r"""
int cuDriverGetVersion(int *v) { *v = 13000; return 0; }
int cuInit(unsigned int flags) { (void)flags; return 100; }  /* CUDA_ERROR_NO_DEVICE */
"""


def test_100_capture_asks_cuinit_of_the_driver(tmp_path: Path) -> None:
    """Real capture in a child process; simulated: libcuda.so.1 is a stub compiled here (cuInit -> 100)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the stand-in libcuda")
    (tmp_path / "stub.c").write_text(STUB)
    subprocess.run(
        [cc, "-shared", "-fPIC", "-o", str(tmp_path / "libcuda.so.1"), str(tmp_path / "stub.c")],
        check=True,
        timeout=60,
    )
    code = (
        "import json; from envcheck.checks.cuda.capture import capture_cuda; c = capture_cuda(); "
        "print(json.dumps([c['cu_init'], c['driver_cuda'], c['libcuda_error']]))"
    )
    env = {
        "PATH": "/usr/bin:/bin",
        "LD_LIBRARY_PATH": str(tmp_path),
        "CUDA_VISIBLE_DEVICES": "",
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [100, 13000, None]
