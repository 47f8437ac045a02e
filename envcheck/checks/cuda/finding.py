"""What cuda.available captured of each CUDA layer (`CudaLayers`), and one broken layer's finding (`Finding`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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
    nvml_gpus: list[dict[str, Any]] | str | None = None  # NVML's GPUs (uuid, mig, mig_devices), or why not known
    device_access: dict[str, str] | None = None  # /dev/nvidia* nodes open() refuses: name -> errno name; None: unread
    char_symlinks_missing: list[str] | None = None  # host only: nodes without a /dev/char/<major>:<minor> link


@dataclass(frozen=True)
class Finding:
    """One broken layer: what is wrong and the concrete fix."""

    layer: str
    problem: str
    fix: str
    fault_class: str  # node, image or config: who has to act (see envcheck.core.result.FaultClass)
    # The stable finding code (`cuda.error.802`); empty: `cuda.<layer>` (see `finding_code`).
    code: str = ""


def finding_code(finding: Finding) -> str:
    """The finding's stable code: its own, else `cuda.<layer>` (cuda.container, cuda.driver, cuda.devices ...)."""
    return finding.code or f"cuda.{finding.layer.replace('-', '_')}"
