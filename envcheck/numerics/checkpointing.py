"""train.checkpointing: torch.utils.checkpoint (use_reentrant=False) gives the same gradients, and less memory on CUDA."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from envcheck.core.check import Context
from envcheck.core.result import Result
from envcheck.reference.compare import Comparison, compare, comparisons_result
from envcheck.reference.devices import check_devices, cuda_devices, numerics_mode

CKPT_TOL = {"atol": 1e-6, "rtol": 1e-5}  # float32: the recomputed forward is the same arithmetic
Checkpoint = Callable[[Callable[[Any], Any], Any], Any]


def real_checkpoint(block: Callable[[Any], Any], x: Any) -> Any:
    """torch.utils.checkpoint with use_reentrant=False (it restores the RNG state, so dropout replays)."""
    from torch.utils.checkpoint import checkpoint

    return checkpoint(block, x, use_reentrant=False)


def _blocks(device: str, width: int, depth: int) -> Any:
    import torch

    torch.manual_seed(0)
    return torch.nn.ModuleList(
        torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.GELU(), torch.nn.Dropout(0.2))
        for _ in range(depth)
    ).to(device)


def _grads(blocks: Any, x: Any, wrap: Checkpoint | None) -> list[Any]:
    import torch

    x = x.clone().requires_grad_(True)
    torch.manual_seed(123)  # the same dropout masks for both runs
    h = x
    for block in blocks:
        h = wrap(block, h) if wrap is not None else block(h)
    (h * h).sum().backward()
    return [x.grad, *(p.grad for p in blocks.parameters())]


def checkpoint_comparisons(device: str, wrap: Checkpoint = real_checkpoint) -> list[Comparison]:
    """Input and parameter gradients with and without checkpointing, dropout active."""
    import torch

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(16, 32, generator=gen).to(device)
    plain = _grads(_blocks(device, 32, 4), x, None)
    ckpt = _grads(_blocks(device, 32, 4), x, wrap)
    names = ["input", *(f"param{i}" for i in range(len(plain) - 1))]
    return [
        compare(c, p, op=f"checkpointed {n}.grad", device=device, dtype="float32", **CKPT_TOL)
        for n, c, p in zip(names, ckpt, plain, strict=True)
    ]


def cuda_peak_bytes(device: str, wrap: Checkpoint | None) -> int:
    """Peak allocated CUDA memory over one forward+backward of a deeper, wider stack."""
    import torch

    blocks = _blocks(device, 1024, 8)
    x = torch.randn(1024, 1024, device=device)
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    _grads(blocks, x, wrap)
    torch.cuda.synchronize(device)
    return int(torch.cuda.max_memory_allocated(device))


def train_checkpointing(ctx: Context, wrap: Checkpoint = real_checkpoint) -> Result:
    """Checkpointed gradients equal plain ones on every device; on CUDA the peak memory drops."""
    extra: dict[str, Any] = {}
    problems = []
    with numerics_mode():
        comparisons = [c for device in check_devices() for c in checkpoint_comparisons(device, wrap)]
        for device in cuda_devices():
            plain, ckpt = cuda_peak_bytes(device, None), cuda_peak_bytes(device, wrap)
            extra[f"peak_bytes@{device}"] = {"plain": plain, "checkpointed": ckpt}
            if ckpt >= plain:
                problems.append(
                    f"checkpointing did not lower peak memory on {device}: {ckpt} >= {plain} bytes"
                )
    if not cuda_devices():
        extra["peak_memory"] = "not measured: no CUDA device (CPU has no peak-allocation counter)"
    return comparisons_result(
        "gradient checkpointing",
        comparisons,
        tolerances=CKPT_TOL,
        extra=extra,
        problems=problems,
        remediation="use torch.utils.checkpoint.checkpoint(fn, x, "
        "use_reentrant=False) with preserve_rng_state=True",
    )
