"""Ground-truth training scripts for the corpus: each trains a tiny model the way a user would and returns what
the training produced (final weights, losses, scale), so a mechanism's harm is shown as a changed outcome."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

STEPS = 25


def _mlp(act: Any = torch.tanh) -> tuple[torch.nn.Module, Any]:
    torch.manual_seed(0)
    l1, l2 = torch.nn.Linear(4, 8), torch.nn.Linear(8, 1)
    model = torch.nn.ModuleList([l1, l2])
    return model, lambda x: l2(act(l1(x)))


def flat(model: torch.nn.Module) -> torch.Tensor:
    """Every parameter, flattened into one vector."""
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def train_optimizer(name: str, foreach: bool = True, **opts: Any) -> torch.Tensor:
    """Regression MLP trained STEPS steps with torch.optim.<name>(foreach=...)."""
    model, fwd = _mlp()
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(32, 4, generator=g), torch.randn(32, 1, generator=g)
    opt = getattr(torch.optim, name)(model.parameters(), foreach=foreach, **opts)
    for i in range(STEPS):
        opt.zero_grad()
        scale = 3.0 if i < 3 else 0.05 if i < 6 else 1.0  # a shrinking gradient, as after a warm-up spike
        (F.mse_loss(fwd(x), y) * scale).backward()
        opt.step()
    return flat(model)


def train_classifier(loss: str = "cross_entropy", big_logits: bool = False, **kw: Any) -> torch.Tensor:
    """Linear 5-class classifier trained with SGD on F.<loss>(logits, target, **kw); targets -100 are padding."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(6, 5)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(40, 6, generator=g) * (40.0 if big_logits else 1.0)
    y = torch.randint(0, 5, (40,), generator=g)
    y[::4] = -100
    opt = torch.optim.SGD(layer.parameters(), lr=0.1 if not big_logits else 1e-3)
    for _ in range(STEPS):
        opt.zero_grad()
        logits = layer(x)
        if loss == "cross_entropy":
            out = F.cross_entropy(logits, y, **kw)
        elif loss == "nll_loss":
            out = F.nll_loss(F.log_softmax(logits, 1), y, **kw)
        else:
            t = (y.clamp_min(0)[:, None] == torch.arange(5)).float()
            out = F.binary_cross_entropy_with_logits(logits, t, **kw)
        out.backward()
        opt.step()
    return torch.cat([flat(layer), out.detach().reshape(1)])


def train_low_precision(op: str) -> torch.Tensor:
    """bfloat16/float16 training pieces: an epoch loss summed/averaged in low precision; a softmax classifier."""
    g = torch.Generator().manual_seed(1)
    if op in ("sum", "mean"):
        dtype = torch.bfloat16 if op == "sum" else torch.float16
        per_sample = (torch.rand(8192, generator=g) * (0.02 if op == "sum" else 3e4)).to(dtype)
        reported = getattr(torch, op)(per_sample)  # the epoch loss a training log/LR scheduler reads
        return reported.float().reshape(1)
    torch.manual_seed(0)
    layer = torch.nn.Linear(6, 300).to(torch.bfloat16)
    x = torch.randn(16, 6, generator=g).to(torch.bfloat16) * 30
    y = torch.randint(0, 300, (16,), generator=g)
    opt = torch.optim.SGD(layer.parameters(), lr=1e-3)
    for _ in range(10):
        opt.zero_grad()
        logp = getattr(torch, op)(layer(x), dim=1)
        logp = logp if op == "log_softmax" else logp.clamp_min(1e-30).log()
        F.nll_loss(logp.float(), y).backward()
        opt.step()
    return flat(layer).float()


def train_amp(
    steps: int = 200, clip: bool = True, inf_every: int = 37, init_scale: float = 2.0**16
) -> torch.Tensor:
    """CPU AMP loop: autocast bfloat16, GradScaler, unscale_ + clip, with an overflowing batch every inf_every."""
    model, fwd = _mlp()
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(32, 4, generator=g), torch.randn(32, 1, generator=g)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    scaler = torch.amp.GradScaler("cpu", init_scale=init_scale, growth_interval=10)
    for i in range(steps):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = F.mse_loss(fwd(x).float(), y) * (float("inf") if i % inf_every == 5 else 1.0)
        scaler.scale(loss).backward()
        if clip:
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
        scaler.step(opt)
        scaler.update()
    return torch.cat([flat(model), torch.tensor([scaler.get_scale()]).log2()])


def train_autocast_eval_then_train() -> torch.Tensor:
    """Each step evaluates under no_grad, then trains, inside one autocast region (a common validate-then-step)."""
    model, fwd = _mlp()
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(32, 4, generator=g), torch.randn(32, 1, generator=g)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(STEPS):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            with torch.no_grad():
                fwd(x)
            loss = F.mse_loss(fwd(x).float(), y)
        loss.backward()
        opt.step()
    return flat(model)


def train_gradient_penalty(act: str) -> torch.Tensor:
    """A WGAN-GP-style critic: loss + ||d out/d x||², whose weight gradient needs the activation's double backward."""
    model, fwd = _mlp(act=getattr(F, act))
    g = torch.Generator().manual_seed(1)
    x = torch.randn(32, 4, generator=g).requires_grad_(True)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for _ in range(STEPS):
        opt.zero_grad()
        out = fwd(x)
        (gx,) = torch.autograd.grad(out.sum(), x, create_graph=True)
        (out.mean() + 10 * (gx.norm(dim=1) - 1).pow(2).mean()).backward()
        opt.step()
    return flat(model)


def train_with_inplace(path: str) -> torch.Tensor:
    """A buffer saved for backward is then updated in place (EMA via _foreach_, or an embedding renorm);
    autograd must refuse the step. Returns the weights it trained to, or NaN when autograd refused."""
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.randn(4, 3))
    opt = torch.optim.SGD([w], lr=0.1)
    ema = torch.rand(4, 3) + 0.5
    try:
        for _ in range(5):
            opt.zero_grad()
            if path == "foreach":
                loss = (w * ema).sum()
                torch._foreach_mul_([ema], 0.5)  # EMA decay applied before backward
            else:
                c = torch.randn(4, 3, requires_grad=True)
                loss = (w * c).sum()  # saves w
                loss = loss + F.embedding(torch.tensor([0, 1]), w, max_norm=0.1).sum()
            loss.backward()
            opt.step()
    except RuntimeError as exc:
        if "inplace" in str(exc):
            return torch.tensor([float("nan")])
        raise
    return w.detach().reshape(-1)


def train_checkpointed_dropout() -> torch.Tensor:
    """An MLP with dropout inside torch.utils.checkpoint, trained with a fixed seed."""
    from torch.utils import checkpoint as ck

    torch.manual_seed(0)
    block = torch.nn.Sequential(
        torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Dropout(0.3), torch.nn.Linear(8, 1)
    )
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(32, 8, generator=g), torch.randn(32, 1, generator=g)
    opt = torch.optim.SGD(block.parameters(), lr=0.1)
    torch.manual_seed(5)
    for _ in range(10):
        opt.zero_grad()
        F.mse_loss(ck.checkpoint(block, x, use_reentrant=False), y).backward()
        opt.step()
    return flat(block)
