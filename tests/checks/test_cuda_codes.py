"""CUDA init errors by code (issue 16), from the real warning texts users posted.

Simulated: the host layers are injected (a GPU host with device nodes, /proc/driver/nvidia and a driver that
supports torch's CUDA), and torch's warning text is the real one quoted from the cited issue. The stub-libcuda
and private-/dev recipe of the issue is not built here yet.
"""

from __future__ import annotations

import pytest

from envcheck.checks.cuda_diagnosis import CudaLayers, diagnose

GPU_HOST = dict(torch_installed=True, torch_cuda="12.6", device_nodes=["nvidia0", "nvidiactl"],
                proc_driver=True, in_container=False, driver_cuda=12080, driver_capabilities=None)

# https://github.com/hiyouga/LlamaFactory/issues/7888 (torch 2.7.0+cu126)
E802 = ("CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before "
        "calling NumCudaDevices() that might have already set an error? Error 802: system not yet initialized "
        "(Triggered internally at /pytorch/c10/cuda/CUDAFunctions.cpp:109.)")
# https://github.com/easydiffusion/easydiffusion/issues/379
E803 = ("CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before "
        "calling NumCudaDevices() that might have already set an error? Error 803: system has unsupported display "
        "driver / cuda driver combination (Triggered internally at  /opt/conda/conda-bld/pytorch_1646755903507/work/"
        "c10/cuda/CUDAFunctions.cpp:112.)")
# https://github.com/PKU-YuanGroup/Video-LLaVA/issues/22
E804 = ("CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before "
        "calling NumCudaDevices() that might have already set an error? Error 804: forward compatibility was "
        "attempted on non supported HW (Triggered internally at ../c10/cuda/CUDAFunctions.cpp:109.)")


@pytest.mark.parametrize("text, problem, fix, fault", [
    (E802, "nvidia-fabricmanager is not running", "systemctl enable --now nvidia-fabricmanager", "node"),
    (E803, "the libcuda in use is not the kernel driver's", "/proc/driver/nvidia/version", "node"),
    (E804, "a cuda-compat libcuda is in use", "drop the forward-compat libcuda", "image"),
])
def test_cuda_init_error_codes_name_their_cause(text: str, problem: str, fix: str, fault: str) -> None:
    found = diagnose(CudaLayers(**GPU_HOST, torch_error=text))  # type: ignore[arg-type]
    assert found[0].layer == "cuda-init", found
    assert problem in found[0].problem and fix in found[0].fix and found[0].fault_class == fault
    assert all(f.layer != "unknown" for f in found)
