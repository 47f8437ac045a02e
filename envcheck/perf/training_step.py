"""The workload the training claims are measured on: one step of a small transformer stack.

`build` makes the model and a batch; `make_step` returns a closure doing one full training step
(zero_grad, forward under optional autocast, backward with optional GradScaler, optional
`clip_grad_norm_`, optimizer step), so variants differ in exactly one thing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# (d_model, heads, ff, layers, batch, seq) per device and mode.
SHAPES = {
    ("cuda", "quick"): (1024, 16, 4096, 2, 8, 512),
    ("cuda", "full"): (1024, 16, 4096, 4, 8, 1024),
    ("cpu", "quick"): (128, 4, 512, 2, 4, 32),
    ("cpu", "full"): (256, 4, 1024, 2, 8, 64),
}
# Checkpointing needs activations large enough to dominate the step's memory; on a CPU the
# training-speed shapes above are too small for that, so it gets longer sequences.
CHECKPOINT_CPU_SHAPES = {"quick": (128, 4, 512, 4, 4, 128), "full": (128, 4, 512, 4, 8, 256)}


@dataclass
class Workload:
    """A model, an input batch and the device they live on."""

    model: Any
    x: Any
    device: str
    shape: tuple[int, ...]


def transformer_stack(d: int, heads: int, ff: int, layers: int, checkpoint: bool) -> Any:
    """`layers` pre-norm encoder blocks, each wrapped in activation checkpointing when asked."""
    import torch
    from torch.utils.checkpoint import checkpoint as ckpt

    class _Stack(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.blocks = torch.nn.ModuleList(
                torch.nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, batch_first=True, norm_first=True)
                for _ in range(layers)
            )

        def forward(self, x: Any) -> Any:
            for block in self.blocks:
                x = ckpt(block, x, use_reentrant=False) if checkpoint and self.training else block(x)
            return x

    return _Stack()


def build(
    device: str,
    quick: bool,
    *,
    checkpoint: bool = False,
    seed: int = 0,
    shape: tuple[int, int, int, int, int, int] | None = None,
) -> Workload:
    """The model and batch for `device` (`cuda` or `cpu`) at the quick or full size (or `shape`)."""
    import torch

    kind = "cuda" if device.startswith("cuda") else "cpu"
    shape = shape or SHAPES[(kind, "quick" if quick else "full")]
    d, heads, ff, layers, batch, seq = shape
    torch.manual_seed(seed)
    model = transformer_stack(d, heads, ff, layers, checkpoint).to(device).train()
    x = torch.randn(batch, seq, d, device=device)
    return Workload(model, x, device, shape)


def make_step(
    work: Workload,
    *,
    autocast_dtype: Any = None,
    scaler: Any = None,
    clip: float | None = None,
    model: Any = None,
    clip_fn: Any = None,
) -> Callable[[], None]:
    """One training step on `work` (or on `model`, e.g. a compiled one, with the same parameters)."""
    import torch

    net = work.model if model is None else model
    clip_fn = clip_fn or torch.nn.utils.clip_grad_norm_
    params = [p for p in work.model.parameters()]
    opt = torch.optim.SGD(params, lr=1e-4, momentum=0.9)
    device_type = "cuda" if work.device.startswith("cuda") else "cpu"

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(
            device_type, dtype=autocast_dtype or torch.float32, enabled=autocast_dtype is not None
        ):
            loss = net(work.x).float().pow(2).mean()
        if scaler is not None:
            scaler.scale(loss).backward()
            if clip is not None:
                scaler.unscale_(opt)
                clip_fn(params, clip)
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            if clip is not None:
                clip_fn(params, clip)
            opt.step()

    return step


def describe(work: Workload) -> dict[str, Any]:
    """The workload's shape as JSON."""
    d, heads, ff, layers, batch, seq = work.shape
    params = sum(p.numel() for p in work.model.parameters())
    return {
        "d_model": d,
        "heads": heads,
        "ff": ff,
        "layers": layers,
        "batch": batch,
        "seq": seq,
        "parameters": int(params),
        "device": work.device,
    }
