"""CUDA driver error codes as torch's warning shows them (802, 803, 999 ...): the cause each code means on a host, its
fix and who must act, and what the captured layers add to a code (a version skew, a GPU lost in NVML). Pure."""

from __future__ import annotations

import re

from envcheck.checks.cuda.finding import CudaLayers, LayerFinding
from envcheck.core.result import FaultClass
from envcheck.probe.modules import module_loaded

# CUDA driver errors as torch's warning shows them ("CUDA initialization: ... Error 802: system not yet
# initialized"): the cause each code means on a host, its fix, and who must act.
CUDA_CODES: dict[int, tuple[str, str, FaultClass]] = {
    802: (
        "CUDA error 802 (system not yet initialized): on NVSwitch systems (HGX/DGX) the GPUs' NVLink fabric "
        "registration is not complete (the fabric manager not running, still training, or of another version than "
        "the driver; gpu.health reads the fabric state and the daemon)",
        "on the host: systemctl enable --now nvidia-fabricmanager, with the fabricmanager package of exactly the "
        "driver's version (nvidia-smi -q | grep -i fabric shows the state)",
        FaultClass.NODE,
    ),
    803: (
        "CUDA error 803 (unsupported display driver / cuda driver combination): the libcuda in use is not the "
        "kernel driver's (a stale libcuda.so.1, or a forward-compat libcuda from the image on a newer driver)",
        "make libcuda.so.1 the one of the loaded driver (cat /proc/driver/nvidia/version vs ls -l the libcuda "
        "that ldconfig -p lists); in a container, remove a cuda-compat package/LD_LIBRARY_PATH entry",
        FaultClass.NODE,
    ),
    804: (
        "CUDA error 804 (forward compatibility was attempted on non supported HW): a cuda-compat libcuda is in "
        "use on a GPU that does not support forward compatibility (it is for data-center GPUs)",
        "drop the forward-compat libcuda (cuda-compat package, /usr/local/cuda/compat on LD_LIBRARY_PATH) and "
        "upgrade the host driver instead",
        FaultClass.IMAGE,
    ),
    100: (
        "CUDA error 100 (no CUDA-capable device is detected): every GPU is hidden from this process",
        "check NVIDIA_VISIBLE_DEVICES (void/none hide all) and CUDA_VISIBLE_DEVICES, and docker run --gpus all",
        FaultClass.CONFIG,
    ),
    35: (
        "CUDA error 35 (CUDA driver version is insufficient for CUDA runtime version)",
        "upgrade the host driver (CUDA 12.x needs >= 525.60.13, 13.x >= 580), or use a torch built for an older "
        "CUDA major",
        FaultClass.NODE,
    ),
    999: (
        "CUDA error 999 (unknown error): the driver is likely wedged (after suspend/resume, or a GPU fell off "
        "the bus)",
        "on the host: check dmesg for NVRM/Xid, reload nvidia_uvm (rmmod nvidia_uvm; "
        "modprobe nvidia_uvm) or reboot",
        FaultClass.NODE,
    ),
}
_CODE = re.compile(r"(?:Error|error=|error \()\s*(\d{2,3})")
# Codes torch names only in words (c10/cuda/CUDAFunctions.cpp words these cudaGetDeviceCount results).
_WORDED = (
    ("CUDA unknown error", 999),
    ("driver on your system is too old", 35),
    ("Found no NVIDIA driver", 35),
)
KERNEL_MODULE = re.compile(r"Kernel Module\s+(?:for \S+\s+)?(\d+\.\d+(?:\.\d+)?)")
_LIBCUDA = re.compile(r"/libcuda\.so\.(\d+\.\d+(?:\.\d+)?)$")


def cuda_code(error: str | None, cu_init: int | None = None) -> int | None:
    """The CUDA error code in torch's warning (by number or by torch's words), else cuInit's, else None."""
    m = _CODE.search(error or "")
    if m and int(m.group(1)) in CUDA_CODES:
        return int(m.group(1))
    for words, code in _WORDED:
        if words in (error or ""):
            return code
    return cu_init if cu_init in CUDA_CODES else None


def version_skew(layers: CudaLayers) -> tuple[str, str] | None:
    """(kernel module version, libcuda version) when they differ: a driver upgraded without a reboot."""
    kernel = KERNEL_MODULE.search(layers.proc_driver_version or "")
    user = next((m.group(1) for p in layers.libraries if (m := _LIBCUDA.search(p))), None)
    return (kernel.group(1), user) if kernel and user and kernel.group(1) != user else None


def unknown_error_cause(layers: CudaLayers) -> tuple[str, str, FaultClass | None] | None:
    """Error 999's likely causes on the host, checked one by one: (cause, fix, the class when it is not the
    code's own) for the first one found."""
    if "gpu is lost" in (layers.nvml_error or "").lower():
        return (
            f"NVML reports {layers.nvml_error}: the GPU has fallen off the bus (PCIe link or hardware fault)",
            "drain the node and reboot it (nvidia-smi shows 'GPU is lost'); check dmesg for Xid 79 and the "
            "GPU's seating, power and PCIe link",
            None,
        )
    skew = version_skew(layers)
    if skew:
        return (
            f"the loaded kernel module is {skew[0]} (/proc/driver/nvidia/version) but libcuda is "
            f"{skew[1]}: the driver was upgraded without a reboot (or a stale libcuda is first on the path)",
            "reboot the host (or reload the nvidia modules) so the kernel module matches libcuda",
            None,
        )
    if layers.device_nodes and "nvidia-uvm" not in layers.device_nodes:
        return uvm_missing(layers.kernel_modules, layers.in_container)
    return None


def uvm_missing(modules: object, contained: bool) -> tuple[str, str, FaultClass | None]:
    """(cause, fix, CONFIG where it is the container's) for a missing /dev/nvidia-uvm (CUDA needs it), from the kernel's own module list, which decides
    whether nvidia_uvm is loaded: the node alone proves nothing (it is created on first use, nvidia-modprobe -u -c0;
    'It's possible nvidia-uvm is not created by just loading the module', google/go-tpm-tools#925; a container is
    given it only with the compute capability)."""
    loaded = module_loaded(modules, "nvidia_uvm")
    where = "this container was not given it" if contained else "the device node was never created"
    if loaded is True:
        return (
            f"/dev/nvidia-uvm is missing, though the kernel lists nvidia_uvm as loaded: {where} (CUDA needs it)",
            "run the container with NVIDIA_DRIVER_CAPABILITIES including compute (or --device /dev/nvidia-uvm)"
            if contained
            else "nvidia-modprobe -u -c0 (creates /dev/nvidia-uvm and /dev/nvidia-uvm-tools)",
            FaultClass.CONFIG if contained else None,
        )
    if loaded is False:
        return (
            "/dev/nvidia-uvm is missing and the kernel lists no nvidia_uvm module: it is not loaded (CUDA "
            "needs it)",
            "on the host: modprobe nvidia-uvm (or nvidia-modprobe -u -c0)"
            + (", then restart the container" if contained else ""),
            None,
        )
    return (
        f"/dev/nvidia-uvm is missing (CUDA needs it); whether nvidia_uvm is loaded was not read ({modules})",
        "on the host: lsmod | grep nvidia_uvm; modprobe nvidia-uvm (or nvidia-modprobe -u -c0)",
        None,
    )


def cuda_code_finding(error: str | None, layers: CudaLayers | None = None) -> LayerFinding | None:
    """The finding for a CUDA error code in torch's warning or cuInit's result, or None."""
    code = cuda_code(error, layers.cu_init if layers else None)
    if code is None:
        return None
    problem, fix, fault = CUDA_CODES[code]
    cause = unknown_error_cause(layers) if code in (999, 803) and layers else None
    if cause and code == 803 and not cause[0].startswith("the loaded kernel module"):
        cause = None  # 803 is a libcuda/kernel mismatch: only the version skew explains it further
    if cause:
        problem = (
            f"CUDA error {code} ({'unknown error' if code == 999 else 'driver combination'}): {cause[0]}"
        )
        fix = cause[1]
        fault = cause[2] or fault
    elif code == 999 and layers:
        problem += (
            " (checked and ruled out: a GPU lost in NVML, kernel module vs libcuda version"
            f"{'' if layers.proc_driver_version and layers.libraries else ' (not readable here)'}, "
            "/dev/nvidia-uvm present)"
        )
    return LayerFinding(problem, fix, fault, code=f"cuda.error.{code}", layer="cuda-init")
