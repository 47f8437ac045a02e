"""Where numerics checks run: CPU always, plus one visible CUDA device of each GPU model; and sane thread counts.

A numerics check judges the arithmetic of this torch build on this kind of GPU. Eight GPUs of one model run the same
kernels, libraries and clocks' worth of arithmetic, so the first of each model stands for the others: judging all of
them multiplies a full run by the GPU count (train.state_roundtrip's device pairs by its square: 81 on an 8-GPU node;
three pairs took 82 s on one H100) and blows the checks' timeouts on a healthy node, while a GPU that
computes wrong on its own is a hardware fault that cuda.arch (a kernel on every GPU), cuda.devices (a memory pattern on
every GPU), gpu.health (ECC, Xid, row remapping) and dcgm.diag are there to find. Two models on one node (rare) are
both judged. Of one model's GPUs, the first that no other process holds is the one judged (check_devices).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator

from envcheck.probe.gpu_usage import holder, read_usage

# The checks use tiny tensors: one CPU thread is fastest, and immune to OpenMP spin contention on a busy
# host (measured here: a 60-step MLP run took 0.5 s on 1 thread, 4-7 s on 2 threads under load).
MAX_THREADS = 1


def gpu_model(index: int) -> tuple[str, int, int, int]:
    """What makes two visible GPUs the same for numerics: name, compute capability and SM count (a MIG slice or a
    PCIe card of the same name has fewer SMs)."""
    import torch

    props = torch.cuda.get_device_properties(index)
    return (str(props.name), int(props.major), int(props.minor), int(getattr(props, "multi_processor_count", 0)))


def pci_key(index: int) -> str | None:
    """Visible GPU `index`'s PCI address as probe.gpu_usage keys it ('0000:18:00'), from torch's device properties
    (no CUDA context); None when torch does not give it."""
    import torch

    props = torch.cuda.get_device_properties(index)
    bus = getattr(props, "pci_bus_id", None)
    if bus is None:
        return None
    return f"{int(getattr(props, 'pci_domain_id', 0)):04x}:{int(bus):02x}:{int(getattr(props, 'pci_device_id', 0)):02x}"


@functools.cache
def held_gpus() -> frozenset[int]:
    """The visible GPUs (torch indices) that NVML shows held by another process (its processes, memory nearly full,
    an exclusive compute mode: probe.gpu_usage.holder); none when NVML cannot tell. Read once per process."""
    import torch

    usage = read_usage()
    if not isinstance(usage, dict):
        return frozenset()
    keys = {i: pci_key(i) for i in range(torch.cuda.device_count())}
    return frozenset(i for i, key in keys.items() if key in usage and holder(usage[key]) is not None)


def check_devices() -> list[str]:
    """`cpu` followed by one visible CUDA device of each GPU model (`cuda:0` alone on an idle node of one model).

    Of several GPUs of one model, the first that no other process holds stands for them (on a shared node another
    job's GPU is busy, not a place to judge arithmetic); the first of the model when all are held or NVML cannot
    tell. NVML is asked only when a model has more than one GPU."""
    import torch

    if not torch.cuda.is_available():
        return ["cpu"]
    models: dict[tuple[str, int, int, int], list[int]] = {}
    for i in range(torch.cuda.device_count()):
        models.setdefault(gpu_model(i), []).append(i)
    held = held_gpus() if any(len(ids) > 1 for ids in models.values()) else frozenset()
    return ["cpu", *(f"cuda:{next((i for i in ids if i not in held), ids[0])}" for ids in models.values())]


def cuda_devices() -> list[str]:
    """The visible CUDA devices numerics checks run on, one of each model (empty without a GPU)."""
    return [d for d in check_devices() if d != "cpu"]


@contextlib.contextmanager
def numerics_mode(seed: int = 0) -> Iterator[None]:
    """Seed torch, use MAX_THREADS CPU threads, disable TF32 (so float32 means float32); restore afterwards."""
    import torch

    threads = torch.get_num_threads()
    tf32 = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.manual_seed(seed)
    torch.set_num_threads(max(1, min(threads, MAX_THREADS)))
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32


def native_bf16(device: str) -> bool:
    """Whether a CUDA device computes bfloat16 natively (sm_80+), not by emulation.

    Recent torch's is_bf16_supported() also answers True on T4/V100, where bfloat16 is emulated (slow, and not
    what AMP should be judged on); so ask with including_emulation=False, or read the capability.
    """
    import inspect

    import torch

    if torch.version.hip:
        return True
    index = torch.device(device).index or 0
    if "including_emulation" in inspect.signature(torch.cuda.is_bf16_supported).parameters:
        with torch.cuda.device(index):
            return bool(torch.cuda.is_bf16_supported(including_emulation=False))
    return tuple(torch.cuda.get_device_capability(index)) >= (8, 0)
