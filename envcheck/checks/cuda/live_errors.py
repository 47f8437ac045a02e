"""CUDA errors met at run time by the torch checks (cuda.devices, cudnn.conv, vision.ops ...): which GPU (its torch
device properties), whether the error poisons the process's context (the worker is replaced), and a busy GPU told
from a broken one by NVML's compute modes (probe.gpu_usage, within the NVML budget). The live helpers beside the
pure layer rules of envcheck.checks.cuda.layers."""

from __future__ import annotations

from collections.abc import Callable

from envcheck.checks.cuda.finding import LayerFinding
from envcheck.core.result import FaultClass
from envcheck.probe.gpu_usage import compute_modes

# Finding codes this module emits (each one is in envcheck.cluster.finding_codes.TABLE).
GPU_BUSY = "cuda.gpu_busy"
GPU_UNUSABLE = "cuda.gpu_unusable"

# CUDA errors that leave the context unusable: every later CUDA call in the process fails too, so the worker
# must be replaced before the next check (CUDA runtime API docs: "sticky" errors).
STICKY_CUDA_ERRORS = (
    "illegal memory access",
    "illegal instruction",
    "unspecified launch failure",
    "uncorrectable ecc error",
    "misaligned address",
    "device-side assert triggered",
    "hardware stack error",
    "launch timed out",
    "an exception occurred on the device",
    "cudaerrorillegaladdress",
    "cudaerrorlaunchfailure",
    "cudaerrorecc",
)
DEVICES_BUSY = ("busy or unavailable", "cudaerrordevicesunavailable")  # cudaErrorDevicesUnavailable = 46


# A check that crashed may leave the worker half-changed (a module half-imported, an operator registered twice:
# torchvision's "... already registered" on re-import), so later checks in that worker would fail for its sake.
# Said in the summary of a result that sets `restart_worker` (the flag is what the engine reads).
WORKER_RESTART = "envcheck restarts the worker for later checks"


def sticky_cuda_error(text: str) -> bool:
    """True when a result's text carries a CUDA error that poisons the process's context (CUDA's own words), so
    the worker must be replaced. A check that crashed, or one that sets `restart_worker`, is replaced anyway."""
    low = text.lower()
    return any(s in low for s in STICKY_CUDA_ERRORS)


def gpu_label(index: int) -> str:
    """`GPU 0 (NVIDIA H100 80GB HBM3, UUID GPU-..., PCI 0000:19:00.0)`; parts that cannot be read are left out.

    Reads device properties only (no CUDA context is created), so it works on a GPU that cannot run kernels.
    """
    parts: list[str] = []
    try:
        import torch

        props = torch.cuda.get_device_properties(index)
        parts.append(str(props.name))
        uuid = getattr(props, "uuid", None)
        if uuid is not None:
            text = str(uuid)
            parts.append(f"UUID {text}")
        bus = getattr(props, "pci_bus_id", None)
        if bus is not None:
            domain, device = getattr(props, "pci_domain_id", 0), getattr(props, "pci_device_id", 0)
            parts.append(f"PCI {int(domain):08x}:{int(bus):02x}:{int(device):02x}.0")
    except Exception as exc:  # the properties of a broken GPU may not be readable either
        parts.append(f"properties unreadable: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
    return f"GPU {index} ({', '.join(parts)})"


def busy_gpu_finding(
    error: str, where: str | None = None, modes: Callable[[], dict[int, str] | str] | None = None
) -> LayerFinding | None:
    """For cudaErrorDevicesUnavailable ('CUDA-capable device(s) is/are busy or unavailable'): which GPU, its
    compute mode, and the fix; None for any other error."""
    if not any(s in error.lower() for s in DEVICES_BUSY):
        return None
    found = (modes or compute_modes)()
    if isinstance(found, str):
        mode_text = found
        exclusive: list[int] = []
    else:
        exclusive = [
            i for i, m in found.items() if m in ("EXCLUSIVE_PROCESS", "EXCLUSIVE_THREAD", "PROHIBITED")
        ]
        mode_text = "compute mode " + ", ".join(f"NVML GPU {i}: {m}" for i, m in sorted(found.items()))
    subject = where or "a GPU"
    fix = (
        "wait for the other job on that GPU to end (nvidia-smi lists it), or as root set the default "
        "compute mode: nvidia-smi -i <index> -c DEFAULT (on Slurm, request the GPU for this job)"
    )
    if exclusive:  # another process holds an exclusive GPU: busy, not broken, so never a node fault
        problem = (
            f"{subject} is busy or unavailable (cudaErrorDevicesUnavailable): {mode_text}; an "
            "EXCLUSIVE_PROCESS GPU admits one process, and another process already holds it"
        )
        return LayerFinding(problem, fix, FaultClass.CONFIG, code=GPU_BUSY, layer="gpu")
    problem = f"{subject} is busy or unavailable (cudaErrorDevicesUnavailable); {mode_text}"
    if isinstance(found, str):  # no evidence of who holds it, nor that nobody does: not the node's on a guess
        return LayerFinding(problem, fix, FaultClass.CONFIG, code=GPU_BUSY, layer="gpu")
    return LayerFinding(
        problem + "; no GPU is in an exclusive mode, so the GPU itself refuses contexts",
        "drain; nvidia-smi -q -i <index>; dmesg | grep -iE 'NVRM|Xid'; reset the GPU (nvidia-smi -r -i "
        "<index>) or reboot the node",
        FaultClass.NODE,
        code=GPU_UNUSABLE,
        layer="gpu",
    )


def gpu_error(index: int | None, exc: BaseException | str, what: str = "") -> LayerFinding:
    """A CUDA error on one GPU, named (index, UUID, PCI bus id), with the fix its kind calls for."""
    text = str(exc)
    first = (text.strip().splitlines() or [type(exc).__name__])[0]
    where = gpu_label(index) if index is not None else "a GPU"
    busy = busy_gpu_finding(text, where)
    if busy is not None:
        return busy
    if sticky_cuda_error(text):
        return LayerFinding(
            f"{where}{': ' + what if what else ''}: {first} (a sticky CUDA error: the "
            "process's CUDA context is unusable; envcheck restarts the worker for later checks)",
            "the GPU or its driver faulted: check dmesg for Xid errors and nvidia-smi -q -d ECC,"
            "PAGE_RETIREMENT; reset the GPU (nvidia-smi -r -i <index>) or drain the node",
            FaultClass.NODE,
            layer="gpu",
        )
    return LayerFinding(
        f"{where}{': ' + what if what else ''}: {first}",
        "run nvidia-smi -q -i <index> and check dmesg for Xid errors on that GPU",
        FaultClass.NODE,
        layer="gpu",
    )
