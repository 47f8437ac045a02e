"""Where numerics checks run: CPU always, plus every visible CUDA device; and sane thread counts."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

# The checks use tiny tensors: one CPU thread is fastest, and immune to OpenMP spin contention on a busy
# host (measured here: a 60-step MLP run took 0.5 s on 1 thread, 4-7 s on 2 threads under load).
MAX_THREADS = 1


def check_devices() -> list[str]:
    """`cpu` followed by `cuda:0`, `cuda:1`, ... for every visible GPU."""
    import torch

    cuda = [f"cuda:{i}" for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    return ["cpu", *cuda]


def cuda_devices() -> list[str]:
    """Every visible CUDA device (empty without a GPU)."""
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
