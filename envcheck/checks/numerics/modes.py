"""modules.train_eval: modules whose behaviour differs between train() and eval(), against closed forms in float64.

BatchNorm1d/2d/3d and InstanceNorm (track_running_stats): over STEPS training batches of different sizes, the output
is (x - mean)/sqrt(var_biased + eps)·w + b and the running statistics follow r <- (1 - m)·r + m·stat with the
unbiased variance (m = 1/num_batches_tracked when momentum is None, the cumulative average), as the torch.nn docs
state; in eval() the output uses the running statistics (batch statistics without them) and no buffer moves.
Dropout, Dropout1d/2d/3d, AlphaDropout, FeatureAlphaDropout: in train(), every kept element is exactly x/(1-p)
(alpha variants: a·x + b, and a dropped one a·α' + b, with α' = -λα and a, b from Klambauer et al. 2017), whole
channels drop together for the feature variants, the gradient is the same mask and scale, and the dropped fraction
lies within 6 binomial standard deviations of p; in eval() the output is the input. Full level adds the ModuleInfo
sweep (module_sweep.py). Tolerance for the normalizations: (n + 8)·u·(1 + |ref|) with n the reduced count (a mean and
a variance of n terms, Higham 2002 eq. 4.4), u of float32.
"""

from __future__ import annotations

import itertools
from typing import Any

from envcheck.core.check import Context, Level
from envcheck.core.result import Result
from envcheck.reference.compare import Comparison, compare, comparisons_result
from envcheck.reference.devices import check_devices, numerics_mode
from envcheck.reference.norm_stats import alpha_dropout_affine, norm_reference

STEPS, EPS, CHANNELS = 3, 1e-5, 3
BATCHES = (4, 6, 5)  # a different batch size each step: the running variance's n/(n-1) differs per step
NORMS = {
    "BatchNorm1d": (),
    "BatchNorm2d": (3, 2),
    "BatchNorm3d": (2, 2, 3),
    "InstanceNorm1d": (7,),
    "InstanceNorm2d": (3, 3),
}
DROPOUTS = {
    "Dropout": (8, 3, 5, 5),
    "Dropout1d": (8, 6, 9),
    "Dropout2d": (8, 6, 3, 3),
    "Dropout3d": (8, 6, 2, 2, 2),
    "AlphaDropout": (8, 3, 5, 5),
    "FeatureAlphaDropout": (8, 6, 3, 3),
}


def norm_comparisons(device: str, quick: bool) -> list[Comparison]:
    """Every normalization x momentum (0.1, 0.5, None) x affine, train then eval, vs norm_reference."""
    import torch

    u = torch.finfo(torch.float32).eps / 2
    comps: list[Comparison] = []
    names = ("BatchNorm1d", "BatchNorm2d") if quick else tuple(NORMS)
    for name, momentum, affine in itertools.product(names, (0.1, 0.5, None), (True, False)):
        if momentum is None and name.startswith("Instance"):
            continue  # InstanceNorm documents no cumulative average (it passes momentum None as 0.0)
        gen = torch.Generator().manual_seed(len(comps))
        batches = [3 * torch.randn(b, CHANNELS, *NORMS[name], generator=gen).double() + 1.5 for b in BATCHES]
        kw: dict[str, Any] = {"momentum": momentum, "affine": affine, "eps": EPS}
        if name.startswith("Instance"):
            kw["track_running_stats"] = True
        mod = getattr(torch.nn, name)(CHANNELS, **kw).to(device)
        params = None
        if affine:
            with torch.no_grad():
                mod.weight.copy_(torch.linspace(0.5, 2.0, CHANNELS))
                mod.bias.copy_(torch.linspace(-1.0, 1.0, CHANNELS))
            params = torch.stack(
                [torch.linspace(0.5, 2.0, CHANNELS), torch.linspace(-1.0, 1.0, CHANNELS)]
            ).double()
        outs, rm, rv, eval_out = norm_reference(name.startswith("Instance"), batches, momentum, params, EPS)
        label = f"{name}(momentum={momentum}, affine={affine})"
        n = max(b.numel() for b in batches) // CHANNELS
        tol = {"atol": (n + 8) * u * (1 + float(max(o.abs().max() for o in outs))), "rtol": 0.0}
        mod.train()
        for t, (x, ref) in enumerate(zip(batches, outs, strict=True)):
            comps.append(
                compare(
                    mod(x.float().to(device)),
                    ref,
                    op=f"{label} train output step {t}",
                    device=device,
                    dtype="float32",
                    **tol,
                )
            )
        stat_tol = {"atol": (n + 8) * u * (1 + float(rv.abs().max() + rm.abs().max())), "rtol": 0.0}
        comps.append(
            compare(
                mod.running_mean, rm, op=f"{label} running_mean", device=device, dtype="float32", **stat_tol
            )
        )
        comps.append(
            compare(
                mod.running_var,
                rv,
                op=f"{label} running_var (unbiased)",
                device=device,
                dtype="float32",
                **stat_tol,
            )
        )
        if name.startswith("Batch"):
            comps.append(
                compare(
                    mod.num_batches_tracked.double().reshape(1),
                    torch.tensor([float(STEPS)]),
                    op=f"{label} num_batches_tracked",
                    device=device,
                    dtype="int64",
                    atol=0.0,
                    rtol=0.0,
                )
            )
        mod.eval()
        before = (mod.running_mean.clone(), mod.running_var.clone())
        comps.append(
            compare(
                mod(batches[-1].float().to(device)),
                eval_out,
                op=f"{label} eval output (running stats)",
                device=device,
                dtype="float32",
                atol=(n + 8) * u * (1 + float(eval_out.abs().max())),
                rtol=0.0,
            )
        )
        comps.append(
            compare(
                torch.cat([mod.running_mean, mod.running_var]),
                torch.cat(before),
                op=f"{label} eval leaves the running stats alone",
                device=device,
                dtype="float32",
                atol=0.0,
                rtol=0.0,
            )
        )
    return comps


def dropout_comparisons(device: str, quick: bool) -> tuple[list[Comparison], list[str]]:
    """Every dropout module x p, train and eval, forward and backward, vs its closed form."""
    import torch

    comps: list[Comparison] = []
    problems: list[str] = []
    for name, p in itertools.product(DROPOUTS, (0.3,) if quick else (0.0, 0.3, 0.7)):
        shape = DROPOUTS[name]
        x = (
            (torch.randn(*shape, generator=torch.Generator().manual_seed(3)) + 3.0)
            .to(device)
            .requires_grad_(True)
        )
        mod = getattr(torch.nn, name)(p).to(device)
        feature = name not in ("Dropout", "AlphaDropout")
        alpha = "Alpha" in name
        label = f"{name}(p={p})"
        y = mod.train()(x)
        gy = torch.randn(shape, generator=torch.Generator().manual_seed(4)).to(device)
        (y * gy).sum().backward()  # not y.backward(gy): that imports sympy (~1-3 s cold)
        x64, y64, g64, gy64 = (
            x.detach().double().cpu(),
            y.detach().double().cpu(),
            x.grad.double().cpu(),
            gy.double().cpu(),
        )
        a, b, alpha_p = alpha_dropout_affine(p) if alpha else (1 / (1 - p), 0.0, 0.0)
        kept = (y64 - (a * x64 + b)).abs() <= 1e-5 * (1 + (a * x64).abs())
        if feature:  # a channel is kept or dropped as a whole: reduce the mask over the spatial dims
            chan = kept.reshape(shape[0], shape[1], -1)
            whole = chan.all(-1) | (~chan).all(-1)
            if not bool(whole.all()):
                problems.append(
                    f"{label} on {device}: a channel was partly dropped (feature dropout drops whole "
                    "channels)"
                )
            kept = chan.all(-1, keepdim=True).expand_as(chan).reshape(shape)
        dropped_value = torch.full_like(x64, a * alpha_p + b if alpha else 0.0)
        expect = torch.where(kept, a * x64 + b, dropped_value)
        comps.append(
            compare(
                y64,
                expect,
                op=f"{label} train output (kept scaled, dropped {'a·α′+b' if alpha else '0'})",
                device=device,
                dtype="float32",
                atol=1e-5,
                rtol=2e-6,
            )
        )
        comps.append(
            compare(
                g64,
                torch.where(kept, a * gy64, torch.zeros_like(gy64)),
                op=f"{label} gradient (same mask and scale)",
                device=device,
                dtype="float32",
                atol=1e-6,
                rtol=2e-6,
            )
        )
        units = shape[0] * shape[1] if feature else x64.numel()
        frac = 1 - float(kept.double().mean())
        if abs(frac - p) > 6 * (p * (1 - p) / units) ** 0.5 + 1e-9:
            problems.append(
                f"{label} on {device}: dropped {frac:.3f} of {'channels' if feature else 'elements'}, "
                f"p={p} (beyond 6 binomial standard deviations)"
            )
        comps.append(
            compare(
                mod.eval()(x.detach()),
                x64,
                op=f"{label} eval is the identity",
                device=device,
                dtype="float32",
                atol=0.0,
                rtol=0.0,
            )
        )
    return comps, problems


def modules_train_eval(ctx: Context) -> Result:
    """Normalization and dropout modules follow their documented train and eval behaviour; full level sweeps
    torch's ModuleInfos whose train and eval differ, float32 vs float64, on every device."""
    from envcheck.checks.numerics.module_sweep import module_sweep

    quick = ctx.level is Level.QUICK
    comparisons: list[Comparison] = []
    problems: list[str] = []
    extra: dict[str, Any] = {}
    with numerics_mode():
        for device in check_devices():
            comparisons += norm_comparisons(device, quick)
            found, bad = dropout_comparisons(device, quick)
            comparisons += found
            problems += bad
            if not quick:
                found, bad, info = module_sweep(device)
                comparisons += found
                problems += bad
                extra.update(info)
    tolerances = {
        "normalization": "(n+8)·u·(1+|ref|), n = reduced count",
        "dropout": "kept = x/(1-p) exactly (1e-5), dropped fraction within 6 binomial sd",
        "module_db": "(K+8)·u·(1+|ref|)",
    }
    return comparisons_result(
        "train/eval modules vs closed forms",
        comparisons,
        tolerances=tolerances,
        extra=extra,
        problems=problems,
        remediation="a module computes the wrong thing for its mode; check model.train() / "
        "model.eval() calls, then reinstall torch",
    )
