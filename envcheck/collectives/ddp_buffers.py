"""DDP's handling of module buffers, part of `ddp.differential` (full level): real ranks train a model with BatchNorm
under DistributedDataParallel, and each rank's buffers and the parameters are compared with one float64 process that
simulates every rank by the documented rules (closed-form BatchNorm, no DDP, no nn.BatchNorm1d).

The rules (torch.nn.parallel.DistributedDataParallel's documentation and its init_sync/forward_sync_buffers notes):
at construction the parameters, and the buffers unless `broadcast_buffers=False`, are broadcast from rank 0; with
`broadcast_buffers=True` (or `forward_sync_buffers=True`, its replacement since torch 2.13) every forward in training
first broadcasts all of rank 0's buffers, the module's buffers as they are then: a buffer replaced after construction
(`module.bn.running_mean = tensor`, pytorch#63916, fixed by pytorch#64472, which made DDP re-read the module's buffers
before every broadcast) or registered after it is broadcast like the others; without it each rank's buffers follow
its own batches. Gradients are averaged over the ranks whatever each rank's buffers were.

Axes: the buffer setting (broadcast_buffers True or False; forward_sync_buffers False where torch has it) x what
happens after construction (nothing; a buffer registered; BatchNorm's running_mean replaced by a new tensor). Every
rank starts from different buffer values, so a broadcast that does not happen (or happens where it must not) shows.
Tolerance as ddp.py: STEPS·depth·u·(1 + max|ref|), depth = 3·(MICRO + WIDTH) + world + 16.
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
import warnings
from dataclasses import asdict, dataclass
from typing import Any

from envcheck.collectives.rank_context import RankContext
from envcheck.core.check import DistOptions
from envcheck.core.result import Result
from envcheck.reference.compare import Comparison, compare
from envcheck.reference.known_bugs import judge_with_known_bugs

STEPS, LR, MICRO, WIDTH, EPS, MOMENTUM = 3, 0.1, 4, 6, 1e-5, 0.1
CHANGES = ("none", "registered", "replaced")


@dataclass(frozen=True)
class BufferCase:
    """One point of the buffer option space."""

    setting: str  # "broadcast_buffers=True", "broadcast_buffers=False", "forward_sync_buffers=False"
    change: str  # CHANGES

    @property
    def init_sync(self) -> bool:
        """Whether construction broadcasts the buffers (only `broadcast_buffers=False` excludes them)."""
        return self.setting != "broadcast_buffers=False"

    @property
    def forward_sync(self) -> bool:
        """Whether every training forward first broadcasts rank 0's buffers."""
        return self.setting == "broadcast_buffers=True"

    @property
    def label(self) -> str:
        """The options, for the comparison's name."""
        after = {
            "none": "no buffer change",
            "registered": "a buffer registered",
            "replaced": "running_mean replaced",
        }
        return f"DDP({self.setting}; {after[self.change]} after construction)"


def cases(forward_sync_option: bool) -> list[BufferCase]:
    """Every setting this torch has x every change."""
    settings = ["broadcast_buffers=True", "broadcast_buffers=False"]
    settings += ["forward_sync_buffers=False"] if forward_sync_option else []
    return [BufferCase(s, c) for s, c in itertools.product(settings, CHANGES)]


def build(device: Any, dtype: Any) -> Any:
    """Linear, BatchNorm1d, ReLU, Linear; a registered `shift` buffer joins the hidden layer when present."""
    import torch

    class Net(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.a = torch.nn.Linear(5, WIDTH)
            self.bn = torch.nn.BatchNorm1d(WIDTH, momentum=MOMENTUM, eps=EPS)
            self.c = torch.nn.Linear(WIDTH, 2)

        def forward(self, x: Any) -> Any:
            h = self.bn(self.a(x))
            shift = self._buffers.get("shift")
            return self.c(torch.relu(h if shift is None else h + shift))

    torch.manual_seed(0)
    return Net().to(device, dtype)


def batch(step: int, world: int) -> tuple[Any, Any]:
    """The global batch of `step` (world·MICRO samples); rank r trains on rows r·MICRO..(r+1)·MICRO."""
    import torch

    gen = torch.Generator().manual_seed(500 + step)
    return torch.randn(world * MICRO, 5, generator=gen) * 2 + 0.5, torch.randn(
        world * MICRO, 2, generator=gen
    )


def start_values(rank: int) -> dict[str, float]:
    """Each rank's buffer values before construction, and after it (the registered or replacing tensor's)."""
    return {"mean": 0.5 * rank, "var": 1.0 + rank, "shift": 0.25 * (rank + 1), "replaced": 2.0 + rank}


def ddp_kwargs(case: BufferCase) -> dict[str, Any]:
    """The DDP keyword for the case's setting."""
    name, _, value = case.setting.partition("=")
    return {name: value == "True"}


def rank_run(rc: RankContext, case: BufferCase) -> tuple[dict[str, Any], list[Any]]:
    """This rank's buffers and parameters after STEPS DDP steps."""
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = build(rc.device, torch.float32)
    start = start_values(rc.rank)
    with torch.no_grad():
        model.bn.running_mean.fill_(start["mean"])
        model.bn.running_var.fill_(start["var"])
    kw = ddp_kwargs(case)
    if rc.device.type == "cuda":
        kw["device_ids"] = [rc.device.index]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # broadcast_buffers is deprecated from torch 2.13 on
        ddp = DDP(model, **kw)
    if case.change == "registered":
        model.register_buffer("shift", torch.full((WIDTH,), start["shift"], device=rc.device))
    elif case.change == "replaced":
        model.bn.running_mean = torch.full((WIDTH,), start["replaced"], device=rc.device)
    part = slice(rc.rank * MICRO, (rc.rank + 1) * MICRO)
    for step in range(STEPS):
        x, y = batch(step, rc.world)
        loss = torch.nn.functional.mse_loss(ddp(x[part].to(rc.device)), y[part].to(rc.device))
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                p.add_(p.grad, alpha=-LR)
                p.grad = None
    buffers = {name: b.detach().double().cpu() for name, b in model.named_buffers()}
    return buffers, [p.detach() for p in model.parameters()]


def reference_run(case: BufferCase, world: int) -> tuple[list[dict[str, Any]], list[Any]]:
    """One float64 process: every rank's buffers after STEPS steps, and the shared parameters."""
    import torch

    params = [p.detach().clone().requires_grad_(True) for p in build("cpu", torch.float64).parameters()]
    w_a, b_a, w_bn, b_bn, w_c, b_c = params
    bufs = []
    for rank in range(world):
        start = start_values(rank if not case.init_sync else 0)
        bufs.append(
            {
                "bn.running_mean": torch.full((WIDTH,), start["mean"], dtype=torch.float64),
                "bn.running_var": torch.full((WIDTH,), start["var"], dtype=torch.float64),
                "bn.num_batches_tracked": torch.zeros((), dtype=torch.float64),
            }
        )
    for rank, b in enumerate(bufs):  # after construction: each rank's own value
        start = start_values(rank)
        if case.change == "registered":
            b["shift"] = torch.full((WIDTH,), start["shift"], dtype=torch.float64)
        elif case.change == "replaced":
            b["bn.running_mean"] = torch.full((WIDTH,), start["replaced"], dtype=torch.float64)
    for step in range(STEPS):
        if case.forward_sync:
            bufs = [{k: v.clone() for k, v in bufs[0].items()} for _ in range(world)]
        x, y = (t.double() for t in batch(step, world))
        grads = [torch.zeros_like(p) for p in params]
        for rank, b in enumerate(bufs):
            xs, ys = x[rank * MICRO : (rank + 1) * MICRO], y[rank * MICRO : (rank + 1) * MICRO]
            h = xs @ w_a.T + b_a
            mean, var = h.mean(0), h.var(0, unbiased=False)
            hn = (h - mean) / (var + EPS).sqrt() * w_bn + b_bn
            with torch.no_grad():
                b["bn.running_mean"] = (1 - MOMENTUM) * b["bn.running_mean"] + MOMENTUM * mean
                b["bn.running_var"] = (1 - MOMENTUM) * b["bn.running_var"] + MOMENTUM * var * MICRO / (
                    MICRO - 1
                )
                b["bn.num_batches_tracked"] = b["bn.num_batches_tracked"] + 1
            out = torch.relu(hn + b["shift"] if "shift" in b else hn) @ w_c.T + b_c
            found = torch.autograd.grad(((out - ys) ** 2).mean(), params)
            grads = [g + f / world for g, f in zip(grads, found, strict=True)]
        with torch.no_grad():
            for p, g in zip(params, grads, strict=True):
                p -= LR * g
    return bufs, [p.detach() for p in params]


def case_comparisons(rc: RankContext, case: BufferCase) -> tuple[list[Comparison], str]:
    """This rank's buffers and parameters vs the simulation; a digest of the parameters for the cross-rank check."""
    import torch

    got_bufs, got_params = rank_run(rc, case)
    want_bufs, want_params = reference_run(case, rc.world)
    u = torch.finfo(torch.float32).eps / 2
    depth = 3 * (MICRO + WIDTH) + rc.world + 16
    comps = []
    mine = want_bufs[rc.rank]
    for name in sorted(set(mine) | set(got_bufs)):
        want, got = mine.get(name), got_bufs.get(name)
        if want is None or got is None:  # a buffer one side has: compared against NaN, so it fails by name
            want = torch.full((1,), float("nan"), dtype=torch.float64) if want is None else want
            got = torch.full_like(want, float("nan")) if got is None else got
        exact = name.endswith("num_batches_tracked")
        comps.append(
            compare(
                got.reshape(-1),
                want.reshape(-1),
                op=f"{case.label} rank {rc.rank} buffer {name} after {STEPS} steps",
                device=str(rc.device),
                dtype="int64" if exact else "float32",
                atol=0.0 if exact else STEPS * depth * u * (1 + float(want.abs().max())),
                rtol=0.0,
            )
        )
    scale = 1 + max(float(w.abs().max()) for w in want_params)
    for i, (g, w) in enumerate(zip(got_params, want_params, strict=True)):
        comps.append(
            compare(
                g,
                w,
                op=f"{case.label} param {i} after {STEPS} steps",
                device=str(rc.device),
                dtype="float32",
                atol=STEPS * depth * u * scale,
                rtol=0.0,
            )
        )
    bits = torch.cat([p.reshape(-1) for p in got_params]).cpu().view(torch.int32).tolist()
    return comps, hashlib.sha256(repr(bits).encode()).hexdigest()[:16]


def run(rc: RankContext) -> dict[str, Any]:
    """Every case on this rank: comparisons (as dicts), parameter digests, and what DDP refused."""
    from torch.nn.parallel import DistributedDataParallel

    from envcheck.reference.devices import numerics_mode

    has_option = "forward_sync_buffers" in inspect.signature(DistributedDataParallel.__init__).parameters
    out: dict[str, Any] = {"comparisons": [], "digests": {}, "errors": []}
    with numerics_mode(device=str(rc.device)):
        for n, case in enumerate(cases(has_option)):
            rc.progress(f"ddp_buffers.case{n}")
            try:
                comps, digest = case_comparisons(rc, case)
            except RuntimeError as exc:  # DDP refused the combination on this rank: a finding, not a hang
                out["errors"].append(f"{case.label}: {exc}".splitlines()[0][:300])
                continue
            out["comparisons"] += [asdict(c) for c in comps]
            out["digests"][case.label] = digest
    return out


def judge(
    findings: list[dict[str, Any]], backend: str, world: int, options: DistOptions, step: str = "ddp_buffers"
) -> Result:
    """Every rank's buffers and parameters within tolerance of the simulation, the parameters identical on every
    rank, no case refused."""
    from envcheck.collectives.verdicts import scope

    comps = [
        Comparison(**{**c, "worst_index": tuple(c["worst_index"])})
        for f in findings
        for c in f[step]["comparisons"]
    ]
    problems = [f"rank {f['rank']}: {e}" for f in findings for e in f[step]["errors"]]
    for label in sorted({label for f in findings for label in f[step]["digests"]}):
        if len({f[step]["digests"].get(label) for f in findings}) > 1:
            problems.append(
                f"{label}: ranks ended with different parameters (DDP must keep replicas identical)"
            )
    return judge_with_known_bugs(
        f"DDP buffers over {scope(backend, world)} vs the documented broadcast rules",
        comps,
        problems=problems,
        extra={"buffer_cases": len({label for f in findings for label in f[step]["digests"]})},
        tolerances={"atol": "STEPS·depth·u·(1+max|ref|); num_batches_tracked exact", "rtol": 0},
        remediation="DistributedDataParallel does not broadcast module buffers as documented for these options "
        "(a buffer replaced or registered after construction, broadcast_buffers); update them in place "
        "(buffer.copy_) and reinstall torch",
    )
