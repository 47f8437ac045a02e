"""Where numerics checks run: CPU always, plus one visible CUDA device of each GPU model; and sane thread counts.

A numerics check judges the arithmetic of this torch build on this kind of GPU. Eight GPUs of one model run the same
kernels, libraries and clocks' worth of arithmetic, so the first of each model stands for the others: judging all of
them multiplies a full run by the GPU count (train.state_roundtrip's device pairs by its square: 81 on an 8-GPU node;
three pairs took 82 s on one H100) and blows the checks' timeouts on a healthy node, while a GPU that
computes wrong on its own is a hardware fault that cuda.arch (a kernel on every GPU), cuda.devices (a memory pattern on
every GPU), gpu.health (ECC, Xid, row remapping) and dcgm.diag are there to find. Two models on one node (rare) are
both judged.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

# The checks use tiny tensors: one CPU thread is fastest, and immune to OpenMP spin contention on a busy
# host (measured here: a 60-step MLP run took 0.5 s on 1 thread, 4-7 s on 2 threads under load).
MAX_THREADS = 1


def gpu_model(index: int) -> tuple[str, int, int, int]:
    """What makes two visible GPUs the same for numerics: name, compute capability and SM count (a MIG slice or a
    PCIe card of the same name has fewer SMs)."""
    import torch

    props = torch.cuda.get_device_properties(index)
    return (str(props.name), int(props.major), int(props.minor), int(getattr(props, "multi_processor_count", 0)))


def check_devices() -> list[str]:
    """`cpu` followed by the first visible CUDA device of each GPU model (`cuda:0` alone on a node of one model)."""
    import torch

    if not torch.cuda.is_available():
        return ["cpu"]
    first: dict[tuple[str, int, int, int], str] = {}
    for i in range(torch.cuda.device_count()):
        first.setdefault(gpu_model(i), f"cuda:{i}")
    return ["cpu", *first.values()]


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
