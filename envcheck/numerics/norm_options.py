"""The normalization half of modules.train_eval: BatchNorm1d/2d/3d and InstanceNorm1d/2d/3d over every documented
option that changes their state or output, against closed forms in float64 (envcheck.reference.norm_stats).

Axes (the torch.nn documentation's): track_running_stats (BatchNorm's default True: running statistics follow
r <- (1 - m)·r + m·stat with the unbiased variance, m = 1/num_batches_tracked when momentum is None, and eval uses them;
False: no buffers at all, and batch (instance) statistics in eval too) x momentum (0.1, 0.5, None; InstanceNorm
documents no cumulative average: None there is not judged) x affine x the input's documented shapes (BatchNorm1d
(N, C, L) and (N, C); InstanceNorm batched and unbatched (C, *), which must equal the batched module on a batch of
one). Over STEPS training batches of different sizes (the running variance's n/(n-1) differs per step), then eval:
the output, the buffers after every forward (None where not tracked), num_batches_tracked, and that eval moves no
buffer. Tolerance: (n + 8)·u·(1 + |ref|), n the reduced count (a mean and a variance of n terms, Higham 2002 eq. 4.4),
u of float32.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from envcheck.reference.compare import Comparison, compare
from envcheck.reference.norm_stats import norm_reference

STEPS, EPS, CHANNELS = 3, 1e-5, 3
BATCHES = (4, 6, 5)  # a different batch size each step
# Each module's batched shape after (N, C), and its second documented shape: BatchNorm1d's (N, C), and for InstanceNorm
# the unbatched (C, *).
NORMS = {
    "BatchNorm1d": (7,),
    "BatchNorm2d": (3, 2),
    "BatchNorm3d": (2, 2, 3),
    "InstanceNorm1d": (7,),
    "InstanceNorm2d": (3, 3),
    "InstanceNorm3d": (2, 2, 2),
}
SECOND_SHAPE = {"BatchNorm1d": "2-D (N, C)", "InstanceNorm1d": "unbatched", "InstanceNorm2d": "unbatched",
                "InstanceNorm3d": "unbatched"}  # fmt: skip
QUICK_NORMS = ("BatchNorm1d", "BatchNorm2d", "InstanceNorm1d")


@dataclass(frozen=True)
class NormCase:
    """One point of a normalization module's option space."""

    name: str
    tracking: bool  # track_running_stats
    momentum: float | None
    affine: bool
    form: str  # "batched", or the module's second documented shape (SECOND_SHAPE)

    @property
    def instance(self) -> bool:
        """InstanceNorm (statistics per sample), not BatchNorm."""
        return self.name.startswith("Instance")

    @property
    def label(self) -> str:
        """Every option, for the comparison's name."""
        return (
            f"{self.name}(track_running_stats={self.tracking}, momentum={self.momentum}, affine={self.affine}) "
            f"{self.form} input"
        )


def cases(quick: bool) -> list[NormCase]:
    """The option product; quick: three modules, momentum 0.1 and None."""
    out = []
    names = QUICK_NORMS if quick else tuple(NORMS)
    momenta = (0.1, None) if quick else (0.1, 0.5, None)
    for name, tracking, momentum, affine in itertools.product(names, (True, False), momenta, (True, False)):
        if momentum is None and name.startswith("Instance"):
            continue  # InstanceNorm documents no cumulative average (it passes momentum None on as 0.0)
        if not tracking and momentum == 0.5:
            continue  # without running statistics the momentum only matters as None or not
        for form in ("batched", SECOND_SHAPE.get(name)):
            if form is not None:
                out.append(NormCase(name, tracking, momentum, affine, form))
    return out


def _batches(case: NormCase, seed: int) -> list[Any]:
    """STEPS float64 batches of the case's shape (an unbatched or 2-D case: one sample, or no length)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    shape = NORMS[case.name]
    if case.form == "unbatched":
        return [3 * torch.randn(CHANNELS, *shape, generator=gen).double() + 1.5 for _ in BATCHES]
    if case.form.startswith("2-D"):
        return [3 * torch.randn(b, CHANNELS, generator=gen).double() + 1.5 for b in BATCHES]
    return [3 * torch.randn(b, CHANNELS, *shape, generator=gen).double() + 1.5 for b in BATCHES]


def _module(case: NormCase, device: str) -> tuple[Any, Any]:
    """The module on `device` with known affine parameters, and those parameters (float64, or None)."""
    import torch

    kw: dict[str, Any] = {"momentum": case.momentum, "affine": case.affine, "eps": EPS}
    kw["track_running_stats"] = case.tracking
    mod = getattr(torch.nn, case.name)(CHANNELS, **kw).to(device)
    if not case.affine:
        return mod, None
    weight, bias = torch.linspace(0.5, 2.0, CHANNELS), torch.linspace(-1.0, 1.0, CHANNELS)
    with torch.no_grad():
        mod.weight.copy_(weight)
        mod.bias.copy_(bias)
    return mod, torch.stack([weight, bias]).double()


def case_comparisons(case: NormCase, device: str, seed: int) -> tuple[list[Comparison], list[str]]:
    """Train STEPS batches, then eval, against the closed forms; and what is not as documented beyond values."""
    import torch

    u = torch.finfo(torch.float32).eps / 2
    batches = _batches(case, seed)
    unbatched = case.form == "unbatched"
    as_batch = [b.unsqueeze(0) for b in batches] if unbatched else batches  # the batch of one it must equal
    mod, params = _module(case, device)
    outs, rm, rv, eval_ref = norm_reference(
        case.instance, as_batch, case.momentum, params, EPS, case.tracking
    )
    if unbatched:
        outs, eval_ref = [o.squeeze(0) for o in outs], eval_ref.squeeze(0)
    n = max(b.numel() for b in batches) // CHANNELS
    scale = float(max(o.abs().max() for o in outs))
    tol = {"atol": (n + 8) * u * (1 + scale), "rtol": 0.0, "device": device, "dtype": "float32"}
    comps: list[Comparison] = []
    problems: list[str] = []
    mod.train()
    for t, (x, ref) in enumerate(zip(batches, outs, strict=True)):
        comps.append(compare(mod(x.float().to(device)), ref, op=f"{case.label} train output step {t}", **tol))
    if not case.tracking:
        held = [
            b for b in ("running_mean", "running_var", "num_batches_tracked") if getattr(mod, b) is not None
        ]
        if held:
            problems.append(f"{case.label} on {device}: keeps {', '.join(held)} without track_running_stats")
    else:
        stat = {**tol, "atol": (n + 8) * u * (1 + float(rv.abs().max() + rm.abs().max()))}
        comps.append(compare(mod.running_mean, rm, op=f"{case.label} running_mean", **stat))
        comps.append(compare(mod.running_var, rv, op=f"{case.label} running_var (unbiased)", **stat))
        if not case.instance:
            comps.append(
                compare(
                    mod.num_batches_tracked.double().reshape(1),
                    torch.tensor([float(STEPS)]),
                    op=f"{case.label} num_batches_tracked",
                    **{**tol, "atol": 0.0, "dtype": "int64"},
                )
            )
    mod.eval()
    before = [b.clone() for b in mod.buffers()]
    scale = float(eval_ref.abs().max())
    comps.append(
        compare(
            mod(batches[-1].float().to(device)),
            eval_ref,
            op=f"{case.label} eval output ({'running' if case.tracking else 'batch'} statistics)",
            **{**tol, "atol": (n + 8) * u * (1 + scale)},
        )
    )
    if any(not torch.equal(a, b) for a, b in zip(mod.buffers(), before, strict=True)):
        problems.append(f"{case.label} on {device}: an eval() forward moved its buffers")
    return comps, problems


def norm_comparisons(device: str, quick: bool) -> tuple[list[Comparison], list[str]]:
    """Every normalization case on `device`."""
    comps: list[Comparison] = []
    problems: list[str] = []
    for seed, case in enumerate(cases(quick)):
        found, bad = case_comparisons(case, device, seed)
        comps += found
        problems += bad
    return comps, problems
