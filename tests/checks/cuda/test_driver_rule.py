"""The driver rule follows CUDA's minor-version compatibility: majors first, then that major's floor.

Floors: https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html (13.x >= 580,
12.x >= 525[.60.13]). Simulated: every layer is staged in a CudaLayers (driver CUDA version as cuDriverGetVersion
returns it, /proc/driver/nvidia/version's text, torch's warning); no driver is involved.
"""

from __future__ import annotations

import pytest

from envcheck.checks.cuda.finding import CudaLayers
from envcheck.checks.cuda.layers import diagnose

PROC = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  {v}  Wed Jun 18 12:34:56 UTC 2025"
# https://github.com/hiyouga/LlamaFactory/issues/7888 (a cause that is not the driver)
E802 = (
    "CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before "
    "calling NumCudaDevices() that might have already set an error? Error 802: system not yet initialized "
    "(Triggered internally at /pytorch/c10/cuda/CUDAFunctions.cpp:109.)"
)


def _diagnose(
    driver_cuda: int, kernel: str | None, torch_cuda: str, error: str | None
) -> list[tuple[str, str]]:
    layers = CudaLayers(
        torch_installed=True,
        torch_cuda=torch_cuda,
        device_nodes=["nvidia0", "nvidia-uvm", "nvidiactl"],
        proc_driver=True,
        driver_cuda=driver_cuda,
        torch_error=error,
        proc_driver_version=PROC.format(v=kernel) if kernel else None,
    )
    return [(f.layer, f.problem) for f in diagnose(layers)]


@pytest.mark.parametrize(
    "driver_cuda, kernel, torch_cuda, error, first_layer, words",
    [
        # older major: the driver, with the floor of torch's major
        (12080, "570.86.15", "13.0", None, "driver", "a CUDA 13.x build needs a driver >= 580"),
        (11040, "470.86", "12.6", None, "driver", "a CUDA 12.x build needs a driver >= 525.60.13"),
        # the same major, below its floor (a 12.0 driver older than 525.60.13 reports 12.0)
        (12000, "525.53", "12.1", None, "driver", "below CUDA 12.x's floor 525.60.13"),
        # a lower minor with another cause present: never the driver
        (12020, "535.54.03", "12.8", E802, "cuda-init", "fabric registration is not complete"),
        # a lower minor and nothing else: named, as what minor-version compatibility mostly allows
        (12020, "535.54.03", "12.8", None, "driver", "minor-version compatibility allows"),
        # a newer driver: never the driver
        (13000, "580.95.05", "12.6", E802, "cuda-init", "fabric registration is not complete"),
    ],
)
def test_driver_rule(
    driver_cuda: int, kernel: str, torch_cuda: str, error: str | None, first_layer: str, words: str
) -> None:
    found = _diagnose(driver_cuda, kernel, torch_cuda, error)
    assert found[0][0] == first_layer and words in found[0][1], found
    if first_layer != "driver":
        assert all(layer != "driver" for layer, _ in found), found
