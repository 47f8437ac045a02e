"""What a process's own configuration explains when the CUDA driver API fails on the node path, so that it is never
read as the node's fault: the torch path's rules (checks.cuda.layers), applied to the torch-free probe.

- A container given no GPU (no /dev/nvidia<N>; NVIDIA_VISIBLE_DEVICES=void or none): the container's start.
- NVIDIA_DRIVER_CAPABILITIES without `compute` (or `all`): the NVIDIA container toolkit mounts no libcuda and no
  /dev/nvidia-uvm (libnvidia-container, src/nvc_mount.c: the compute libraries and the UVM devices are mounted
  only for the compute capability), so nvidia-smi works and CUDA cannot.
- CUDA_VISIBLE_DEVICES that leaves CUDA no device: an index that does not exist, a repeat, an unknown UUID (CUDA
  parses the list up to the first bad entry), empty, or -1.
- MIG enabled on every GPU given with no GPU instance created: CUDA enumerates MIG devices only, and there are
  none. That one is the node's administrator's to fix (nvidia-smi mig -cgi), and names MIG.
What none of them explains keeps the class the CUDA error table gives its code (checks.cuda.codes)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envcheck.checks.cuda.finding import CAPABILITIES, CONTAINER, VISIBLE_DEVICES
from envcheck.checks.cuda.layers import CAPABILITIES_FIX
from envcheck.checks.cuda.visible_devices import unchecked_uuids, visible_devices_problem
from envcheck.core.findings import Finding
from envcheck.core.result import FaultClass

# Finding codes this module emits (each one is in envcheck.cluster.finding_codes.TABLE).
MIG_NO_INSTANCE = "gpu.mig_no_instance"

CONTAINER_FIX = (
    "start the container with the GPUs: docker run --gpus all (the nvidia runtime, or a CDI device); Kubernetes: "
    "runtimeClassName: nvidia and a nvidia.com/gpu request, or NVIDIA_VISIBLE_DEVICES=all for a node agent"
)
VISIBLE_FIX = (
    "unset CUDA_VISIBLE_DEVICES (a node check judges every GPU it was given), or set it to GPU indices that exist "
    "here (0,1) or their UUIDs from nvidia-smi -L"
)
MIG_FIX = (
    "create GPU and compute instances on it: nvidia-smi mig -i {i} -cgi <profiles> -C (nvidia-smi mig -lgip "
    "lists the profiles), or disable MIG: nvidia-smi -i {i} -mig 0 and reset the GPU"
)


def _gpu_nodes(access: Mapping[str, Any]) -> int:
    nodes = access.get("device_nodes")
    return len(nodes) if isinstance(nodes, dict) else 0


def _caps_lack(caps: Any, capability: str) -> bool:
    words = set(str(caps).replace(" ", "").lower().split(",")) if isinstance(caps, str) else set()
    return isinstance(caps, str) and not words & {capability, "all"}


def no_gpu_given(access: Mapping[str, Any]) -> Finding | None:
    """A container with no GPU device node: it was started without GPU access."""
    if access.get("in_container") is not True or _gpu_nodes(access):
        return None
    nvd = access.get("nvidia_visible_devices")
    why = (
        f" (NVIDIA_VISIBLE_DEVICES={nvd})"
        if isinstance(nvd, str) and nvd.lower() in ("void", "none", "")
        else ""
    )
    return Finding(
        f"this container was given no GPU: no /dev/nvidia<N>{why}, so the node's GPUs cannot be judged from here",
        CONTAINER_FIX,
        FaultClass.CONFIG,
        code=CONTAINER,
    )


def libcuda_cause(access: Mapping[str, Any]) -> Finding | None:
    """libcuda.so.1 missing where the container's NVIDIA_DRIVER_CAPABILITIES left it out."""
    caps = access.get("driver_capabilities")
    if access.get("in_container") is True and _caps_lack(caps, "compute"):
        return Finding(
            f"libcuda.so.1 is not in this container: NVIDIA_DRIVER_CAPABILITIES={caps!r} lacks 'compute', so the "
            "container toolkit mounted no CUDA driver and no /dev/nvidia-uvm (nvidia-smi still works: 'utility')",
            CAPABILITIES_FIX,
            FaultClass.CONFIG,
            code=CAPABILITIES,
        )
    return None


def no_device_cause(access: Mapping[str, Any], nvml: list[dict[str, Any]] | str | None) -> Finding | None:
    """Why CUDA sees no device (cuInit's CUDA_ERROR_NO_DEVICE, or a count of 0), when configuration says."""
    given = no_gpu_given(access)
    if given:
        return given
    visible = access.get("cuda_visible_devices")
    if isinstance(visible, str):
        problem = visible_devices_problem(visible, _gpu_nodes(access), nvml)
        unchecked = unchecked_uuids(visible, nvml)  # UUIDs NVML could not be asked about
        if problem or unchecked:
            return Finding(
                problem or f"CUDA_VISIBLE_DEVICES={visible!r} leaves CUDA no device here{unchecked}",
                VISIBLE_FIX,
                FaultClass.CONFIG,
                code=VISIBLE_DEVICES,
            )
    caps = access.get("driver_capabilities")
    if access.get("in_container") is True and _caps_lack(caps, "compute"):
        return libcuda_cause(access)
    gpus = [g for g in nvml if isinstance(g, dict)] if isinstance(nvml, list) else []
    empty = [g for g in gpus if g.get("mig") is True and g.get("mig_devices") == []]
    if gpus and len(empty) == len(gpus):
        which = ", ".join(str(g.get("index")) for g in empty)
        return Finding(
            f"MIG is enabled on GPU {which} but no GPU instance exists (nvidia-smi mig -lgi lists none): CUDA "
            "enumerates MIG devices only, so it sees none",
            MIG_FIX.format(i=empty[0].get("index")),
            FaultClass.NODE,
            code=MIG_NO_INSTANCE,
        )
    return None


def uvm_cause(access: Mapping[str, Any], dev: list[str]) -> Finding | None:
    """/dev/nvidia-uvm missing in a container whose capabilities left it out (CUDA then fails with 999)."""
    if "nvidia-uvm" in dev:
        return None
    return libcuda_cause(access)
