"""SyncBatchNorm on real NCCL ranks (part of `ddp.differential`, full level) vs one float64 BatchNorm on the
concatenated batch: output, input gradient, weight and bias gradients (summed over ranks, as DDP would), and the
running statistics, over two training steps, with equal and with unequal per-rank batch sizes (the per-rank counts
weigh the statistics: pytorch#22192, and the input gradient: pytorch#36382), momentum 0.1 and None, affine or not.

torch's SyncBatchNorm refuses CPU tensors and has no CPU kernels (batch_norm_stats, torch 2.13), so on gloo ranks
this step reports that it did not apply. Tolerance: a statistic of n elements, (n + 8)·u·(1 + max|ref|) (Higham 2002
eq. 4.4), n the global element count per channel, doubled for the gradients (two reductions deep).
"""

from __future__ import annotations

import itertools
from dataclasses import asdict
from typing import Any

from envcheck.collectives.rank_context import RankContext
from envcheck.core.check import DistOptions
from envcheck.core.result import Result, passed
from envcheck.reference.compare import Comparison, compare, comparisons_result

CHANNELS, SPATIAL, STEPS = 3, 5, 2
NOT_ON_CPU = "SyncBatchNorm needs CUDA ranks (no CPU kernels for batch_norm_stats in torch): not run on gloo"


def sizes(world: int, uneven: bool) -> list[int]:
    """Per-rank batch sizes."""
    return [3 + (2 * r if uneven else 0) for r in range(world)]


def case_comparisons(rc: RankContext, momentum: float | None, affine: bool, uneven: bool) -> list[Comparison]:
    """Two SyncBatchNorm training steps on this rank vs the float64 single-process BatchNorm."""
    import torch
    import torch.distributed as dist

    label = f"SyncBatchNorm(momentum={momentum}, affine={affine}, per-rank batches={sizes(rc.world, uneven)})"
    n = sizes(rc.world, uneven)
    lo, hi = sum(n[: rc.rank]), sum(n[: rc.rank + 1])
    torch.manual_seed(0)
    sync = torch.nn.SyncBatchNorm(CHANNELS, momentum=momentum, affine=affine).to(rc.device)
    ref = torch.nn.BatchNorm1d(CHANNELS, momentum=momentum, affine=affine).double()
    u = torch.finfo(torch.float32).eps / 2
    count = sum(n) * SPATIAL
    comps: list[Comparison] = []
    for step in range(STEPS):
        gen = torch.Generator().manual_seed(step)
        x = torch.randn(sum(n), CHANNELS, SPATIAL, generator=gen) * 2 + 1
        g = torch.randn(sum(n), CHANNELS, SPATIAL, generator=gen)
        xl = x[lo:hi].to(rc.device).requires_grad_(True)
        out = sync(xl)
        out.backward(g[lo:hi].to(rc.device))
        xr = x.double().requires_grad_(True)
        out_r = ref(xr)
        out_r.backward(g.double())
        tol = (count + 8) * u
        comps.append(
            compare(
                out,
                out_r[lo:hi],
                op=f"{label} step {step} output",
                device=str(rc.device),
                dtype="float32",
                atol=tol * (1 + float(out_r.abs().max())),
                rtol=0.0,
            )
        )
        comps.append(
            compare(
                xl.grad,
                xr.grad[lo:hi],
                op=f"{label} step {step} input gradient",
                device=str(rc.device),
                dtype="float32",
                atol=2 * tol * (1 + float(xr.grad.abs().max())),
                rtol=0.0,
            )
        )
        if affine:
            for name in ("weight", "bias"):
                local = getattr(sync, name).grad.clone()
                dist.all_reduce(local)
                want = getattr(ref, name).grad
                comps.append(
                    compare(
                        local,
                        want,
                        op=f"{label} step {step} {name} gradient (summed over ranks)",
                        device=str(rc.device),
                        dtype="float32",
                        atol=2 * tol * (1 + float(want.abs().max())),
                        rtol=0.0,
                    )
                )
                getattr(sync, name).grad = None
                getattr(ref, name).grad = None
        for name in ("running_mean", "running_var"):
            want = getattr(ref, name)
            comps.append(
                compare(
                    getattr(sync, name),
                    want,
                    op=f"{label} step {step} {name}",
                    device=str(rc.device),
                    dtype="float32",
                    atol=tol * (1 + float(want.abs().max())),
                    rtol=0.0,
                )
            )
    return comps


def run(rc: RankContext) -> dict[str, Any]:
    """Every option set on this rank (CUDA only)."""
    if rc.device.type != "cuda":
        return {"skipped": NOT_ON_CPU}
    from envcheck.reference.devices import numerics_mode

    comps: list[Comparison] = []
    with numerics_mode(device=str(rc.device)):  # the rank's own device, set by the launcher
        for momentum, affine, uneven in itertools.product((0.1, None), (True, False), (False, True)):
            rc.progress(f"sync_batchnorm.momentum={momentum},affine={affine},uneven={uneven}")
            comps += case_comparisons(rc, momentum, affine, uneven)
    return {"comparisons": [asdict(c) for c in comps]}


def judge(findings: list[dict[str, Any]], backend: str, world: int, options: DistOptions) -> Result:
    """Every rank's comparisons within tolerance; on gloo, a note that it did not apply."""
    skipped = [f["sync_batchnorm"].get("skipped") for f in findings if f["sync_batchnorm"].get("skipped")]
    if skipped:
        return passed(f"SyncBatchNorm not run: {skipped[0]}", measured={"sync_batchnorm": skipped[0]})
    comps = [
        Comparison(**{**c, "worst_index": tuple(c["worst_index"])})
        for f in findings
        for c in f["sync_batchnorm"]["comparisons"]
    ]
    return comparisons_result(
        "SyncBatchNorm vs one BatchNorm on the whole batch",
        comps,
        tolerances={"atol": "(n+8)·u·(1+|ref|), n = global count per channel (x2 gradients)"},
        remediation="SyncBatchNorm computes statistics or gradients that differ from one "
        "BatchNorm over the whole batch; keep per-rank batch sizes equal and "
        "reinstall torch",
    )
