"""Why `torch.cuda.is_available()` is False: probe each layer, name the missing one and its fix.

`probe_cuda_layers()` reads the real system; `diagnose()` is pure, so every layer's finding can be
tested, including the ones (old driver, missing capability) that need a GPU host to occur for real.
"""

from __future__ import annotations

import importlib.util
import os
import re
from dataclasses import dataclass, field

from envcheck.checks.probe import driver_cuda_version, in_container, load_library, nvidia_device_nodes

# Minimum Linux driver per CUDA minor (CUDA toolkit release notes, table 3, "Toolkit Driver Version").
MIN_DRIVER = {"11.8": "520.61.05", "12.0": "525.60.13", "12.1": "530.30.02", "12.2": "535.54.03",
              "12.4": "550.54.14", "12.6": "560.28.03", "12.8": "570.26", "12.9": "575.51.03",
              "13.0": "580.65.06"}
CPU_TORCH_FIX = ("pip install --force-reinstall torch torchvision  # PyPI's Linux wheels are CUDA builds; or "
                 "pick a CUDA index: --index-url https://download.pytorch.org/whl/cu128")


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


@dataclass(frozen=True)
class Finding:
    """One broken layer: what is wrong and the concrete fix."""

    layer: str
    problem: str
    fix: str


def probe_cuda_layers(torch_error: str | None = None) -> CudaLayers:
    """Read every layer from the live system (no CUDA context is created here)."""
    torch_cuda = None
    installed = importlib.util.find_spec("torch") is not None
    if installed:
        import torch

        torch_cuda = torch.version.cuda
    nodes = nvidia_device_nodes()
    lib = load_library("libcuda.so.1")
    container = in_container()
    return CudaLayers(
        torch_installed=installed, torch_cuda=torch_cuda, visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
        device_nodes=nodes, proc_driver=os.path.isdir("/proc/driver/nvidia"),
        in_container=container is True, libcuda_error=lib if isinstance(lib, str) else None,
        driver_cuda=None if isinstance(lib, str) else driver_cuda_version(lib),
        driver_capabilities=os.environ.get("NVIDIA_DRIVER_CAPABILITIES"), torch_error=torch_error)


def _cuda_tuple(text: str) -> tuple[int, int]:
    major, _, minor = text.partition(".")
    return int(major), int(minor or 0)


def _visible_devices_problem(value: str | None, gpu_nodes: int) -> str | None:
    if value is None:
        return None
    if not value.strip():
        return "CUDA_VISIBLE_DEVICES is set but empty, which hides every GPU"
    for token in (t.strip() for t in value.split(",")):
        if token.startswith(("GPU-", "MIG-")):
            continue
        if not re.fullmatch(r"\d+", token):
            return f"CUDA_VISIBLE_DEVICES={value!r} is invalid ({token!r} is not a GPU index or UUID)"
        if gpu_nodes and int(token) >= gpu_nodes:
            return f"CUDA_VISIBLE_DEVICES={value!r} names GPU {token}, but only {gpu_nodes} exist"
    return None


def diagnose(layers: CudaLayers) -> list[Finding]:
    """Every broken layer, from the host up to torch, each with its fix."""
    found: list[Finding] = []
    if not layers.torch_installed:
        return [Finding("torch", "torch is not installed", "pip install torch torchvision")]
    gpu_nodes = sum(1 for n in layers.device_nodes if re.fullmatch(r"nvidia\d+", n))
    if not layers.device_nodes and not layers.proc_driver:
        if layers.in_container:
            found.append(Finding("container", "no /dev/nvidia* device nodes and no /proc/driver/nvidia: the "
                                 "container was started without GPU access",
                                 "docker run --gpus all ... (and install nvidia-container-toolkit on the host: "
                                 "nvidia-ctk runtime configure --runtime=docker)"))
        else:
            found.append(Finding("driver", "no /dev/nvidia* device nodes and no /proc/driver/nvidia: no NVIDIA "
                                 "driver is loaded on this host", "install the NVIDIA driver and reboot "
                                 "(nvidia-smi must work), or run with --allow-cpu on a CPU-only machine"))
    elif layers.libcuda_error:
        caps = layers.driver_capabilities
        if layers.in_container and caps is not None and "compute" not in caps and "all" not in caps:
            fix = "set NVIDIA_DRIVER_CAPABILITIES=compute,utility (docker run -e ...)"
            problem = f"libcuda.so.1 cannot be loaded: NVIDIA_DRIVER_CAPABILITIES={caps!r} lacks 'compute'"
        else:
            fix = ("install the NVIDIA driver's user-space libraries (libcuda.so.1), or in a container "
                   "use nvidia-container-toolkit with NVIDIA_DRIVER_CAPABILITIES=compute,utility")
            problem = f"libcuda.so.1 cannot be loaded ({layers.libcuda_error})"
        found.append(Finding("libcuda", problem, fix))
    elif layers.driver_cuda and layers.torch_cuda:
        have = (layers.driver_cuda // 1000, (layers.driver_cuda % 1000) // 10)
        need = _cuda_tuple(layers.torch_cuda)
        if have < need:
            driver = MIN_DRIVER.get(layers.torch_cuda, "a newer one")
            found.append(Finding(
                "driver", f"the driver supports CUDA {have[0]}.{have[1]}, but torch was built for CUDA "
                f"{layers.torch_cuda}", f"upgrade the host driver to >= {driver}, or use an image built for "
                f"CUDA <= {have[0]}.{have[1]} (e.g. a -cuda{have[0]}.x tag from the matrix)"))
    cvd = _visible_devices_problem(layers.visible_devices, gpu_nodes)
    if cvd:
        found.append(Finding("CUDA_VISIBLE_DEVICES", cvd,
                             "unset CUDA_VISIBLE_DEVICES, or set it to valid indices such as 0 or 0,1"))
    if layers.torch_cuda is None:
        found.append(Finding("torch", "torch is a CPU-only build (torch.version.cuda is None)", CPU_TORCH_FIX))
    if not found:
        found.append(Finding("unknown", "CUDA init failed for a reason envcheck does not recognise: "
                             f"{layers.torch_error or 'no error text'}",
                             "run nvidia-smi on the host and in the container; check dmesg for NVRM errors"))
    return found
