"""What cuda.available captured of each CUDA layer (`CudaLayers`), and one broken layer's finding (`LayerFinding`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from envcheck.core.findings import Finding


@dataclass(frozen=True)
class CudaLayers:
    """What each layer between the GPU and torch looks like here."""

    torch_installed: bool
    torch_cuda: str | None = None
    visible_devices: str | None = None
    device_nodes: list[str] = field(default_factory=list)
    proc_driver: bool = False
    in_container: bool = False
    libcuda_error: str | None = None
    driver_cuda: int | None = None  # e.g. 12080
    driver_capabilities: str | None = None
    torch_error: str | None = None
    cu_init: int | None = None  # cuInit(0)'s CUresult, asked of libcuda directly when torch saw no GPU
    proc_driver_version: str | None = None  # /proc/driver/nvidia/version
    libraries: list[str] = field(default_factory=list)  # CUDA-stack libraries mapped (/proc/self/maps)
    nvml_error: str | None = None  # NVML's first error (e.g. "GPU 0: GPU is lost")
    nvml_gpus: list[dict[str, Any]] | str | None = (
        None  # NVML's GPUs (uuid, mig, mig_devices), or why not known
    )
    device_access: dict[str, str] | None = (
        None  # /dev/nvidia* nodes open() refuses: name -> errno name; None: unread
    )
    char_symlinks_missing: list[str] | None = (
        None  # host only: nodes without a /dev/char/<major>:<minor> link
    )
    kernel_modules: dict[str, str] | str | None = (
        None  # the kernel's NVIDIA modules (probe.modules), or why unread
    )


@dataclass(frozen=True, kw_only=True)
class LayerFinding(Finding):
    """One broken layer: the finding, and the layer it is in (`driver`, `devices`, `libcuda`, `torch`, `gpu` ...)."""

    layer: str


# Configuration findings with codes of their own, on the torch path (cuda.available) and the node path alike.
CAPABILITIES = "cuda.capabilities"  # NVIDIA_DRIVER_CAPABILITIES without compute: no libcuda in the container
VISIBLE_DEVICES = "cuda.visible_devices"  # CUDA_VISIBLE_DEVICES leaves CUDA no device
# The code of a layer's finding that names none of its own (`cuda.<layer>`): named constants, for policy to read.
CONTAINER = "cuda.container"
CUDA_INIT = "cuda.cuda_init"
DEVICES = "cuda.devices"
DRIVER = "cuda.driver"
GPU = "cuda.gpu"
LIBCUDA = "cuda.libcuda"
TORCH = "cuda.torch"
UNKNOWN = "cuda.unknown"
LAYER_CODES = {
    "container": CONTAINER,
    "cuda-init": CUDA_INIT,
    "devices": DEVICES,
    "driver": DRIVER,
    "gpu": GPU,
    "libcuda": LIBCUDA,
    "torch": TORCH,
    "unknown": UNKNOWN,
}


def finding_code(finding: LayerFinding) -> str:
    """The finding's stable code: its own, else its layer's (cuda.container, cuda.driver, cuda.devices ...)."""
    return finding.code or LAYER_CODES.get(finding.layer) or f"cuda.{finding.layer.replace('-', '_')}"
