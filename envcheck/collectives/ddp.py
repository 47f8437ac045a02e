"""`ddp.differential`, rank side and verdict: a DistributedDataParallel training run on real ranks (gloo on CPU, NCCL
with one rank per GPU) equals one process training on the concatenated batch, across every pair of values of DDP's
options that change the arithmetic: bucket_cap_mb (one bucket, or one per parameter), gradient_as_bucket_view, static_graph,
find_unused_parameters (with a branch the forward skips), no_sync() gradient accumulation, and the communication
hooks (allreduce, fp16 and bf16 compression; fp16 also with every rank holding the same shard and gradients above
32752, whose sum over two ranks is beyond float16's 65504: only a hook that divides before it sums survives,
pytorch#57410).

Every rank trains STEPS manual SGD steps (p -= lr·grad; the optimizer is not under test) on its slice of each global
batch, and also computes, alone, the reference: the same model in float64 on CPU on the whole global batch. Each rank
reports its comparisons and a digest of its parameters; the verdict wants every comparison within tolerance and every
rank's parameters bitwise identical (DDP's promise). SyncBatchNorm is checked on NCCL ranks (sync_batchnorm.py).

Tolerance (envcheck.reference style): a gradient is at most depth = LAYERS·(batch + width) + world + 16 float32
operations deep, so after STEPS steps |p - p_ref| <= STEPS·depth·u·(1 + max|p|); a compression hook adds, per step,
lr·(world + 2)·u_c·max|g| (the gradient rounded to the hook's dtype after the division and summed there).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

from envcheck.collectives.rank_context import RankContext
from envcheck.core.check import DistOptions
from envcheck.core.result import Result
from envcheck.reference.compare import Comparison, compare
from envcheck.reference.known_bugs import judge_with_known_bugs
from envcheck.reference.pairwise import pairwise

STEPS, LR, MICRO, WIDTH, LAYERS = 3, 0.1, 4, 8, 3
HOOKS = ("none", "allreduce", "fp16_compress", "bf16_compress")


@dataclass(frozen=True)
class DdpCase:
    """One point of DDP's option space."""

    bucket: str  # "default" (25 MB: one bucket) or "per_parameter"
    view: bool  # gradient_as_bucket_view
    static: bool  # static_graph
    unused: bool  # find_unused_parameters, with a branch the forward skips
    hook: str
    accumulate: int  # micro-batches per step (the first ones under no_sync())
    scale: float = (
        1.0  # loss scale putting the largest gradient above 32752 (its double is past float16's 65504)
    )
    same_shards: bool = (
        False  # every rank gets the same data: the ranks' gradients add up instead of cancelling
    )

    @property
    def label(self) -> str:
        """Every option, for the comparison's name."""
        return (
            f"DDP(bucket={self.bucket}, gradient_as_bucket_view={self.view}, static_graph={self.static}, "
            f"find_unused_parameters={self.unused}, hook={self.hook}, no_sync_accumulation={self.accumulate}"
            f"{', loss x' + format(self.scale, 'g') + ', same shard on every rank' if self.scale != 1 else ''})"
        )


def cases() -> list[DdpCase]:
    """Every pair of option values (envcheck.reference.pairwise: 11 cases where the product has 128, each launching
    DDP on every rank), and two with large gradients for the fp16 hook. Every bug this check holds needs at most two
    options to meet (a hook and its overflow, static_graph with no_sync: pytorch#57410, #42399, #187732), and each
    pair of values is in some case; the product's other cases cost a full run about 15 s of its two ranks' CPU."""
    grid = [
        DdpCase(*c)
        for c in pairwise(
            (("default", "per_parameter"), (False, True), (False, True), (False, True), HOOKS, (1, 2))
        )
    ]
    # largest per-rank gradient x scale: 0.878 x 6.2e4 = 54 400 and 0.526 x 1e5 = 52 600 (measured on this model)
    return grid + [
        DdpCase("default", False, False, False, "fp16_compress", 1, 6.2e4, True),
        DdpCase("per_parameter", True, False, False, "fp16_compress", 2, 1e5, True),
    ]


def build(device: Any, dtype: Any) -> Any:
    """The model: three Linear layers, ReLU, and a branch used only when `skip` is False."""
    import torch

    class Net(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.a = torch.nn.Linear(6, WIDTH)
            self.b = torch.nn.Linear(WIDTH, WIDTH)
            self.unused = torch.nn.Linear(WIDTH, WIDTH)
            self.c = torch.nn.Linear(WIDTH, 3)

        def forward(self, x: Any, skip: bool) -> Any:
            h = torch.relu(self.a(x))
            h = torch.relu(self.b(h)) if skip else torch.relu(self.unused(self.b(h)))
            return self.c(h)

    torch.manual_seed(0)
    return Net().to(device, dtype)


def batch(step: int, micro: int, world: int, same: bool = False) -> tuple[Any, Any]:
    """The global micro-batch `micro` of `step`: world·MICRO samples (every rank computes it alike); with `same`,
    the first shard repeated on every rank."""
    import torch

    gen = torch.Generator().manual_seed(1000 * step + micro)
    x, y = torch.randn(world * MICRO, 6, generator=gen), torch.randn(world * MICRO, 3, generator=gen)
    if same:
        x, y = x[:MICRO].repeat(world, 1), y[:MICRO].repeat(world, 1)
    return x, y


def _register(model: Any, hook: str) -> None:
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    if hook != "none":
        model.register_comm_hook(None, getattr(default_hooks, f"{hook}_hook"))


def ddp_run(rc: RankContext, case: DdpCase) -> list[Any]:
    """This rank's parameters after STEPS DDP steps."""
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = build(rc.device, torch.float32)
    kw: dict[str, Any] = {
        "gradient_as_bucket_view": case.view,
        "static_graph": case.static,
        "find_unused_parameters": case.unused,
    }
    if case.bucket == "per_parameter":
        kw["bucket_cap_mb"] = 1e-6
    if rc.device.type == "cuda":
        kw["device_ids"] = [rc.device.index]
    ddp = DDP(model, **kw)
    _register(ddp, case.hook)
    for step in range(STEPS):
        for micro in range(case.accumulate):
            x, y = batch(step, micro, rc.world, case.same_shards)
            part = slice(rc.rank * MICRO, (rc.rank + 1) * MICRO)
            x, y = x[part].to(rc.device), y[part].to(rc.device)
            last = micro == case.accumulate - 1

            def backward(x: Any = x, y: Any = y) -> None:
                loss = torch.nn.functional.mse_loss(ddp(x, case.unused), y) * case.scale / case.accumulate
                loss.backward()

            if last:
                backward()
            else:
                with ddp.no_sync():
                    backward()
        with torch.no_grad():
            for p in model.parameters():
                if p.grad is not None:
                    p.add_(p.grad, alpha=-LR / case.scale)
                    p.grad.zero_()  # in place: with gradient_as_bucket_view the gradient is a bucket view
    return [p.detach() for p in model.parameters()]


def reference_run(case: DdpCase, world: int) -> tuple[list[Any], float]:
    """One process, float64, CPU, the whole global batch: the parameters after STEPS steps, and the largest
    per-rank gradient of a step (the tolerance of the compression hooks scales with it; never the measured run's)."""
    import torch

    model = build("cpu", torch.float64)
    gmax = 0.0
    for step in range(STEPS):
        for micro in range(case.accumulate):
            x, y = batch(step, micro, world, case.same_shards)
            loss = torch.nn.functional.mse_loss(model(x.double(), case.unused), y.double()) * case.scale
            (loss / case.accumulate).backward()
        with torch.no_grad():
            for p in model.parameters():
                if p.grad is not None:
                    gmax = max(
                        gmax, float(p.grad.abs().max())
                    )  # the mean over ranks; a rank's is <= world x it
                    p.add_(p.grad, alpha=-LR / case.scale)
                    p.grad = None
    return [p.detach() for p in model.parameters()], gmax * world


def case_comparisons(rc: RankContext, case: DdpCase) -> tuple[list[Comparison], str]:
    """This rank's DDP parameters vs the reference; and a digest of them for the cross-rank check."""
    import torch

    got = ddp_run(rc, case)
    want, gmax = reference_run(case, rc.world)
    u = torch.finfo(torch.float32).eps / 2
    depth = LAYERS * (MICRO * case.accumulate + WIDTH) + rc.world + 16
    u_c = {
        "fp16_compress": torch.finfo(torch.float16).eps / 2,
        "bf16_compress": torch.finfo(torch.bfloat16).eps / 2,
    }.get(case.hook, 0.0)
    scale = 1 + max(float(w.abs().max()) for w in want)
    atol = STEPS * depth * u * scale + STEPS * LR * (rc.world + 2) * u_c * gmax / case.scale
    comps = [
        compare(
            g,
            w,
            op=f"{case.label} param {i} after {STEPS} steps",
            device=str(rc.device),
            dtype="float32",
            atol=atol,
            rtol=0.0,
        )
        for i, (g, w) in enumerate(zip(got, want, strict=True))
    ]
    bits = torch.cat([g.reshape(-1) for g in got]).cpu().view(torch.int32).tolist()
    digest = hashlib.sha256(repr(bits).encode()).hexdigest()[:16]
    return comps, digest


def run_cases(rc: RankContext) -> dict[str, Any]:
    """Every case on this rank: comparisons (as dicts) and parameter digests."""
    from envcheck.reference.devices import numerics_mode

    out: dict[str, Any] = {"comparisons": [], "digests": {}, "errors": [], "not_applicable": []}
    with numerics_mode(device=str(rc.device)):  # the rank's own device, set by the launcher
        for n, case in enumerate(cases()):
            rc.progress(f"ddp.case{n}")  # a phase name has no spaces (launch.read_progress)
            try:
                comps, digest = case_comparisons(rc, case)
            except (
                TypeError
            ) as exc:  # a hook this backend lacks (bf16 compression needs NCCL): not applicable
                out["not_applicable"].append(f"hook={case.hook}: {exc}".splitlines()[0][:200])
                continue
            except RuntimeError as exc:  # DDP refused this combination on this rank: a finding, not a hang
                out["errors"].append(f"{case.label}: {exc}".splitlines()[0][:300])
                continue
            out["comparisons"] += [asdict(c) for c in comps]
            out["digests"][case.label] = digest
    return out


def run(rc: RankContext) -> dict[str, Any]:
    """The whole option product on this rank."""
    return run_cases(rc)


def judge(
    findings: list[dict[str, Any]], backend: str, world: int, options: DistOptions, step: str = "ddp"
) -> Result:
    """Every rank's comparisons within tolerance, every rank's parameters identical, no case refused."""
    from envcheck.collectives.verdicts import scope

    comps = [
        Comparison(**{**c, "worst_index": tuple(c["worst_index"])})
        for f in findings
        for c in f[step]["comparisons"]
    ]
    problems = [f"rank {f['rank']}: {e}" for f in findings for e in f[step]["errors"]]
    labels = {label for f in findings for label in f[step]["digests"]}
    for label in sorted(labels):
        digests = {f[step]["digests"].get(label) for f in findings}
        if len(digests) > 1:
            problems.append(
                f"{label}: ranks ended with different parameters (DDP must keep replicas identical)"
            )
    extra = {
        "cases": len(labels),
        "backend": backend,
        "world_size": world,
        "not_applicable": dict(Counter(findings[0][step]["not_applicable"])) if findings else {},
    }
    return judge_with_known_bugs(
        f"DDP over {scope(backend, world)} vs one process on the whole batch",
        comps,
        problems=problems,
        extra=extra,
        tolerances={
            "atol": "STEPS·depth·u·(1+max|p|) + compression hooks' STEPS·lr·(world+2)·u_c·max|g|",
            "rtol": 0,
        },
        remediation="DistributedDataParallel computes a different step than one process on "
        "the whole batch for these options; avoid the failing option (bucket "
        "size, static_graph, comm hook) and reinstall torch",
    )
