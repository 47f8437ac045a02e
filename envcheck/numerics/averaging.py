"""swa.averaging: torch.optim.swa_utils against averages computed by hand in float64.

AveragedModel across avg_fn / multi_avg_fn (the default equal-weight SWA, get_swa_multi_avg_fn,
get_ema_multi_avg_fn(decay), a per-tensor EMA avg_fn) and use_buffers: after K updates from known weights p_1..p_K
the averaged parameters are mean(p_k) (SWA) or a_1 = p_1, a_k = d·a_{k-1} + (1 - d)·p_k (EMA); with use_buffers the
floating buffers are averaged the same way, without it they follow the source model (pytorch#84053). update_bn resets
the BatchNorm statistics and sets them to the equal-weight average over the loader's batches of each batch's mean and
unbiased variance (momentum None), restoring the momentum. Full level adds SWALR (cos and linear annealing,
anneal_epochs 0, 1 and 4): lr(t) = swa_lr·α + lr_0·(1 - α), α = anneal(min(1, t/anneal_epochs)). Tolerance: an
average of K terms, (K + 8)·u·(1 + max|ref|); a batch statistic of n terms, (n + 8)·u·(1 + |ref|); SWALR in float64,
16·u64 per epoch.
"""

from __future__ import annotations

import itertools
from typing import Any

from envcheck.core.check import Context, Level
from envcheck.core.result import Result
from envcheck.reference.compare import Comparison, Tensor, compare, comparisons_result
from envcheck.reference.devices import check_devices, numerics_mode
from envcheck.reference.weight_averages import batch_average_statistics, running_average, swalr

UPDATES, DECAY = 5, 0.8
BATCHES = (6, 4, 5)


def _model(device: str) -> Any:
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 2)).to(
        device
    )


def _snapshots(model: Any) -> list[list[Tensor]]:
    """UPDATES successive weights (params then floating buffers) written into `model` before each update."""
    import torch

    gen = torch.Generator().manual_seed(1)
    tensors = [*model.parameters(), *[b for b in model.buffers() if b.is_floating_point()]]
    return [
        [
            torch.randn(t.shape, generator=gen).double() * (k + 1) + (1.0 if "var" in str(i) else 0.0)
            for i, t in enumerate(tensors)
        ]
        for k in range(UPDATES)
    ]


def averaged_model_comparisons(device: str, refused: list[str]) -> list[Comparison]:
    """Every averaging function x use_buffers vs the hand-computed average; combinations torch refuses with an
    error (get_swa_multi_avg_fn on BatchNorm's integer num_batches_tracked, torch 2.13 and 2.14) go to `refused`."""
    import torch
    from torch.optim import swa_utils

    u = torch.finfo(torch.float32).eps / 2
    comps: list[Comparison] = []
    kinds = {
        "swa (default)": {},
        "get_swa_multi_avg_fn": {"multi_avg_fn": swa_utils.get_swa_multi_avg_fn()},
        "get_ema_multi_avg_fn": {"multi_avg_fn": swa_utils.get_ema_multi_avg_fn(DECAY)},
        "ema avg_fn": {"avg_fn": lambda a, p, n: DECAY * a + (1 - DECAY) * p},
    }
    for (kind, kw), use_buffers in itertools.product(kinds.items(), (False, True)):
        model = _model(device)
        avg = swa_utils.AveragedModel(model, use_buffers=use_buffers, **kw)
        snaps = _snapshots(model)
        floats = [*model.parameters(), *[b for b in model.buffers() if b.is_floating_point()]]
        try:
            for snap in snaps:
                with torch.no_grad():
                    for t, v in zip(floats, snap, strict=True):
                        t.copy_(v)
                avg.update_parameters(model)
        except RuntimeError as exc:  # loud, not silent: reported, not judged
            refused.append(f"AveragedModel({kind}, use_buffers={use_buffers}) on {device}: {exc}"[:200])
            continue
        ema = "ema" in kind
        ref = running_average(snaps, DECAY if ema else None)
        got = [*avg.module.parameters(), *[b for b in avg.module.buffers() if b.is_floating_point()]]
        n_params = len(list(model.parameters()))
        label = f"AveragedModel({kind}, use_buffers={use_buffers})"
        for i, (g, r, last) in enumerate(zip(got, ref, snaps[-1], strict=True)):
            want = (
                r if (i < n_params or use_buffers) else last
            )  # without use_buffers buffers follow the model
            what = "parameter" if i < n_params else "buffer"
            comps.append(
                compare(
                    g,
                    want,
                    op=f"{label} {what} {i}",
                    device=device,
                    dtype="float32",
                    atol=(UPDATES + 8) * u * (1 + float(want.abs().max())),
                    rtol=0.0,
                )
            )
        comps.append(
            compare(
                avg.n_averaged.double().reshape(1).cpu(),
                torch.tensor([float(UPDATES)]),
                op=f"{label} n_averaged",
                device=device,
                dtype="int64",
                atol=0.0,
                rtol=0.0,
            )
        )
    return comps


def update_bn_comparisons(device: str) -> list[Comparison]:
    """update_bn over a loader of tensors and of [input, target] pairs vs the equal-weight batch average."""
    import torch
    from torch.optim import swa_utils

    u = torch.finfo(torch.float32).eps / 2
    comps: list[Comparison] = []
    gen = torch.Generator().manual_seed(2)
    batches = [torch.randn(b, 3, generator=gen) * 2 + 1 for b in BATCHES]
    for pairs in (False, True):
        model = _model(device)
        bn = model[1]
        bn.momentum = 0.3
        with torch.no_grad():
            bn.running_mean.fill_(5.0)  # stale statistics that update_bn must reset
        loader = [[x.to(device), torch.zeros(len(x))] if pairs else x.to(device) for x in batches]
        swa_utils.update_bn(loader, model)
        with torch.no_grad():
            h = [model[0](x.to(device)).double().cpu() for x in batches]
        means, vars_ = batch_average_statistics(h)
        label = f"update_bn(loader of {'[input, target]' if pairs else 'tensors'})"
        tol = (max(BATCHES) + 8) * u
        comps.append(
            compare(
                bn.running_mean,
                means,
                op=f"{label} running_mean",
                device=device,
                dtype="float32",
                atol=tol * (1 + float(means.abs().max())),
                rtol=0.0,
            )
        )
        comps.append(
            compare(
                bn.running_var,
                vars_,
                op=f"{label} running_var",
                device=device,
                dtype="float32",
                atol=tol * (1 + float(vars_.abs().max())),
                rtol=0.0,
            )
        )
        comps.append(
            compare(
                torch.tensor([bn.momentum]),
                torch.tensor([0.3]),
                op=f"{label} momentum restored",
                device=device,
                dtype="float64",
                atol=0.0,
                rtol=0.0,
            )
        )
    return comps


def swalr_comparisons() -> list[Comparison]:
    """SWALR's learning rate per epoch vs the closed form."""
    import torch
    from torch.optim import swa_utils

    comps = []
    u = torch.finfo(torch.float64).eps / 2
    for strategy, anneal_epochs in itertools.product(("cos", "linear"), (0, 1, 4)):
        opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=0.5)
        sched = swa_utils.SWALR(opt, swa_lr=0.05, anneal_epochs=anneal_epochs, anneal_strategy=strategy)
        got, want = [], []
        for t in range(8):
            got.append(opt.param_groups[0]["lr"])
            want.append(swalr(t, 0.5, 0.05, anneal_epochs, strategy))
            opt.step()
            sched.step()
        comps.append(
            compare(
                torch.tensor(got, dtype=torch.float64),
                torch.tensor(want, dtype=torch.float64),
                op=f"SWALR(anneal_strategy={strategy}, anneal_epochs={anneal_epochs}) lr per epoch",
                device="cpu",
                dtype="float64",
                atol=8 * 16 * u,
                rtol=0.0,
            )
        )
    return comps


def swa_averaging(ctx: Context) -> Result:
    """AveragedModel (SWA, EMA, buffers), update_bn and SWALR match hand-computed averages, on every device."""
    comparisons: list[Comparison] = []
    refused: list[str] = []
    with numerics_mode():
        for device in check_devices():
            comparisons += averaged_model_comparisons(device, refused) + update_bn_comparisons(device)
        if ctx.level is not Level.QUICK:
            comparisons += (
                swalr_comparisons()
            )  # an optimizer is needed: torch._dynamo, ~1 s, so full level only
    return comparisons_result(
        "weight averaging vs hand-computed averages",
        comparisons,
        tolerances={
            "average": "(K+8)·u·(1+|ref|)",
            "update_bn": "(n+8)·u·(1+|ref|)",
            "swalr": "16·u64 per epoch",
        },
        extra={"refused_by_torch": refused},
        remediation="torch.optim.swa_utils averages or re-estimates statistics wrongly here; "
        "average by hand (torch._foreach_lerp_) and reinstall torch",
    )
