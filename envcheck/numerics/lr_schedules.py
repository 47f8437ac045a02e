"""sched.closed_form (full level): every torch.optim.lr_scheduler, alone and composed (SequentialLR,
ChainedScheduler), across its options, against the closed forms of its documentation (envcheck.reference.schedulers);
and each one saved with its optimizer through torch.save (weights_only load) in the middle of the schedule and
restored into fresh objects, against the uninterrupted run, bitwise.

Two parameter groups (base lr 0.1 and 0.02); CyclicLR and OneCycleLR also cycle the momentum, which is compared too.
Tolerance: torch steps recursively (lr_t from lr_{t-1}), a few float64 operations per epoch, so after N epochs the
closed form and the recursion differ by at most N·16·u64·max lr (u64 = float64 eps/2); a restored run repeats the
same operations on the same values and must match exactly.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable
from typing import Any

from envcheck.core.check import Context
from envcheck.core.result import Result
from envcheck.reference.compare import Comparison, compare, comparisons_result
from envcheck.reference.schedulers import BASES, COMPOSED, EPOCHS, METRIC, MOMENTUM, OPTIONS, expected

Build = Callable[[Any], Any]


def _optimizer(device: str = "cpu") -> Any:
    import torch

    params = [
        torch.nn.Parameter(torch.zeros(2, device=device)),
        torch.nn.Parameter(torch.zeros(3, device=device)),
    ]
    return torch.optim.SGD(
        [{"params": [params[0]], "lr": BASES[0]}, {"params": [params[1]], "lr": BASES[1]}],
        lr=BASES[0],
        momentum=MOMENTUM,
    )


def build(name: str, kw: dict[str, Any]) -> Build:
    """A function making scheduler `name` (or a composition) on an optimizer."""
    import torch.optim.lr_scheduler as lrs

    if name in COMPOSED:
        kind, parts, milestones = COMPOSED[name]

        def composed(opt: Any) -> Any:
            children = [getattr(lrs, n)(opt, **k) for n, k in parts]
            return (
                lrs.SequentialLR(opt, children, milestones)
                if kind == "SequentialLR"
                else lrs.ChainedScheduler(children, optimizer=opt)
            )

        return composed
    return lambda opt: getattr(lrs, name)(opt, **kw)


def run(
    new_scheduler: Build, plateau: bool, epochs: int, resume_at: int | None = None, device: str = "cpu"
) -> list[list[float]]:
    """[lr group 0, lr group 1, momentum group 0] at every epoch; optionally saved and restored at `resume_at`."""
    import torch

    opt = _optimizer(device)
    sched = new_scheduler(opt)
    seen = []
    for t in range(epochs):
        if t == resume_at:
            buf = io.BytesIO()
            torch.save({"optimizer": opt.state_dict(), "scheduler": sched.state_dict()}, buf)
            buf.seek(0)
            state = torch.load(buf, weights_only=True)
            opt = _optimizer(device)
            sched = new_scheduler(opt)
            opt.load_state_dict(state["optimizer"])
            sched.load_state_dict(state["scheduler"])
        seen.append([g["lr"] for g in opt.param_groups] + [opt.param_groups[0]["momentum"]])
        opt.step()
        sched.step(METRIC[t]) if plateau else sched.step()
    return seen


def scheduler_cases() -> list[tuple[str, dict[str, Any]]]:
    """Every (scheduler, options), the compositions included."""
    return [(n, kw) for n, sets in OPTIONS.items() for kw in sets] + [(n, {}) for n in COMPOSED]


def describe(kw: dict[str, Any]) -> str:
    """`k=v, ...` with functions by name."""
    return ", ".join(f"{k}={getattr(v, '__name__', v)}" for k, v in kw.items())


def schedule_comparisons(device: str = "cpu") -> tuple[list[Comparison], list[str]]:
    """Closed form and restored-run comparisons for every case."""
    import torch

    u = torch.finfo(torch.float64).eps / 2
    comps: list[Comparison] = []
    problems: list[str] = []
    for name, kw in scheduler_cases():
        label = f"{name}({describe(kw)})"
        new_scheduler, plateau = build(name, kw), name == "ReduceLROnPlateau"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                got = run(new_scheduler, plateau, EPOCHS, device=device)
                resumed = run(new_scheduler, plateau, EPOCHS, resume_at=EPOCHS // 2 - 1, device=device)
            except Exception as exc:  # a scheduler that cannot be built, stepped or restored is a finding
                problems.append(f"{label}: {type(exc).__name__}: {exc}"[:300])
                continue
        want = torch.tensor(expected(name, kw), dtype=torch.float64)
        scale = float(want.abs().max())
        comps.append(
            compare(
                torch.tensor(got, dtype=torch.float64),
                want,
                op=f"{label} lr/momentum per epoch",
                device=device,
                dtype="float64",
                atol=EPOCHS * 16 * u * scale,
                rtol=0.0,
            )
        )
        comps.append(
            compare(
                torch.tensor(resumed, dtype=torch.float64),
                torch.tensor(got, dtype=torch.float64),
                op=f"{label} restored from state_dict at epoch {EPOCHS // 2 - 1}",
                device=device,
                dtype="float64",
                atol=0.0,
                rtol=0.0,
            )
        )
    return comps, problems


def sched_closed_form(ctx: Context) -> Result:
    """LR schedulers, alone, composed and restored, follow their documented schedules."""
    from envcheck.reference.devices import check_devices, numerics_mode

    comparisons: list[Comparison] = []
    problems: list[str] = []
    with numerics_mode():
        for device in check_devices():  # the parameters (and a fused step's lr) live on each device in turn
            found, bad = schedule_comparisons(device)
            comparisons += found
            problems += bad
    return comparisons_result(
        "LR schedulers vs closed forms",
        comparisons,
        problems=problems,
        tolerances={"closed_form": f"{EPOCHS}·16·u64·max lr", "restored": "bitwise"},
        extra={"cases": len(scheduler_cases())},
        remediation="an LR scheduler follows a different schedule than documented, or does "
        "not resume from its state_dict; pin the scheduler behaviour you need "
        "(LambdaLR with your own formula) and reinstall torch",
    )
