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
import itertools
import warnings
from collections.abc import Callable
from typing import Any

from envcheck.core.check import Context
from envcheck.core.result import Result
from envcheck.reference import schedulers as ref
from envcheck.reference.compare import Comparison, compare, comparisons_result

EPOCHS, BASES = 24, (0.1, 0.02)
METRIC = (1.0, 0.9, 0.95, 0.95, 0.96, 0.8, 0.8, 0.81, 0.82, 0.83, 0.7, 0.7, 0.7, 0.7, 0.7, 0.69, 0.6, 0.6,
          0.61, 0.62, 0.63, 0.64, 0.5, 0.5)
MOMENTUM = 0.9


def _product(**axes: tuple[Any, ...]) -> list[dict[str, Any]]:
    keys = list(axes)
    return [dict(zip(keys, values, strict=True)) for values in itertools.product(*axes.values())]


def _warmup(t: int) -> float:
    return min(1.0, (t + 1) / 5)


def _decay(t: int) -> float:
    return 0.95


# name -> option sets (the product of the axes that change the schedule)
OPTIONS: dict[str, list[dict[str, Any]]] = {
    "StepLR": _product(step_size=(1, 3), gamma=(0.5, 0.9)),
    "MultiStepLR": _product(milestones=([2, 5], [3, 3, 7]), gamma=(0.5, 0.1)),
    "ConstantLR": _product(factor=(0.25, 0.5), total_iters=(1, 4)),
    "LinearLR": _product(start_factor=(0.2, 1.0), end_factor=(1.0, 0.5), total_iters=(3, 8)),
    "ExponentialLR": _product(gamma=(0.9, 0.5)),
    "PolynomialLR": _product(total_iters=(4, 10), power=(1.0, 2.0, 0.5)),
    "CosineAnnealingLR": _product(T_max=(4, 10), eta_min=(0.0, 0.001)),
    "CosineAnnealingWarmRestarts": _product(T_0=(3, 5), T_mult=(1, 2), eta_min=(0.0, 0.001)),
    "LambdaLR": [{"lr_lambda": _warmup}],
    "MultiplicativeLR": [{"lr_lambda": _decay}],
    "CyclicLR": [{"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 3, **o} for o in
                 _product(mode=("triangular", "triangular2", "exp_range"), step_size_down=(None, 5),
                          cycle_momentum=(True, False))],
    "OneCycleLR": [{"max_lr": 0.1, "total_steps": EPOCHS + 1, **o} for o in
                   _product(anneal_strategy=("cos", "linear"), three_phase=(False, True), pct_start=(0.3, 0.25))],
    "ReduceLROnPlateau": _product(mode=("min", "max"), threshold_mode=("rel", "abs"), cooldown=(0, 2),
                                  patience=(1, 3), factor=(0.5,)),
}
for _o in OPTIONS["CyclicLR"]:
    if _o["mode"] == "exp_range":
        _o["gamma"] = 0.9
COMPOSED: dict[str, tuple[str, list[tuple[str, dict[str, Any]]], list[int]]] = {
    "warmup then cosine": ("SequentialLR", [("LinearLR", {"start_factor": 0.1, "total_iters": 4}),
                                            ("CosineAnnealingLR", {"T_max": 12})], [4]),
    "constant, exponential, step": ("SequentialLR", [("ConstantLR", {"factor": 0.5, "total_iters": 10}),
                                                     ("ExponentialLR", {"gamma": 0.9}),
                                                     ("StepLR", {"step_size": 2, "gamma": 0.5})], [3, 7]),
    "two constants": ("SequentialLR", [("ConstantLR", {"factor": 0.5, "total_iters": 3}),
                                       ("ConstantLR", {"factor": 0.3, "total_iters": 4})], [3]),
    "constant x exponential": ("ChainedScheduler", [("ConstantLR", {"factor": 0.5, "total_iters": 4}),
                                                    ("ExponentialLR", {"gamma": 0.9})], []),
    "linear x step": ("ChainedScheduler", [("LinearLR", {"start_factor": 0.2, "total_iters": 5}),
                                           ("StepLR", {"step_size": 3, "gamma": 0.5})], []),
}
Build = Callable[[Any], Any]


def _optimizer() -> Any:
    import torch

    params = [torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(3))]
    return torch.optim.SGD([{"params": [params[0]], "lr": BASES[0]}, {"params": [params[1]], "lr": BASES[1]}],
                           lr=BASES[0], momentum=MOMENTUM)


def build(name: str, kw: dict[str, Any]) -> Build:
    """A function making scheduler `name` (or a composition) on an optimizer."""
    import torch.optim.lr_scheduler as lrs

    if name in COMPOSED:
        kind, parts, milestones = COMPOSED[name]

        def composed(opt: Any) -> Any:
            children = [getattr(lrs, n)(opt, **k) for n, k in parts]
            return lrs.SequentialLR(opt, children, milestones) if kind == "SequentialLR" else \
                lrs.ChainedScheduler(children, optimizer=opt)
        return composed
    return lambda opt: getattr(lrs, name)(opt, **kw)


def run(make: Build, plateau: bool, epochs: int, resume_at: int | None = None) -> list[list[float]]:
    """[lr group 0, lr group 1, momentum group 0] at every epoch; optionally saved and restored at `resume_at`."""
    import torch

    opt = _optimizer()
    sched = make(opt)
    seen = []
    for t in range(epochs):
        if t == resume_at:
            buf = io.BytesIO()
            torch.save({"optimizer": opt.state_dict(), "scheduler": sched.state_dict()}, buf)
            buf.seek(0)
            state = torch.load(buf, weights_only=True)
            opt = _optimizer()
            sched = make(opt)
            opt.load_state_dict(state["optimizer"])
            sched.load_state_dict(state["scheduler"])
        seen.append([g["lr"] for g in opt.param_groups] + [opt.param_groups[0]["momentum"]])
        opt.step()
        sched.step(METRIC[t]) if plateau else sched.step()
    return seen


def expected(name: str, kw: dict[str, Any]) -> list[list[float]]:
    """The documented schedule for both groups (and momentum) over EPOCHS."""
    if name == "ReduceLROnPlateau":
        lrs = [ref.plateau(kw, b, METRIC[:EPOCHS - 1]) for b in BASES]
        return [[b for b in BASES] + [MOMENTUM]] + [[lrs[0][t], lrs[1][t], MOMENTUM] for t in range(EPOCHS - 1)]
    if name in COMPOSED:
        kind, parts, milestones = COMPOSED[name]
        forms = [ref.closed_form(n, k) for n, k in parts]
        form = ref.sequential(forms, milestones) if kind == "SequentialLR" else ref.chained(forms)
        return [[form(BASES[0], t), form(BASES[1], t), MOMENTUM] for t in range(EPOCHS)]
    if name in ("CyclicLR", "OneCycleLR"):
        cycle = ref.cyclic if name == "CyclicLR" else ref.one_cycle
        rows = []
        for t in range(EPOCHS):
            lr, mom = cycle(kw, t)
            rows.append([lr, lr, mom if kw.get("cycle_momentum", True) else MOMENTUM])
        return rows
    form = ref.closed_form(name, kw)
    return [[form(BASES[0], t), form(BASES[1], t), MOMENTUM] for t in range(EPOCHS)]


def scheduler_cases() -> list[tuple[str, dict[str, Any]]]:
    """Every (scheduler, options), the compositions included."""
    return [(n, kw) for n, sets in OPTIONS.items() for kw in sets] + [(n, {}) for n in COMPOSED]


def describe(kw: dict[str, Any]) -> str:
    """`k=v, ...` with functions by name."""
    return ", ".join(f"{k}={getattr(v, '__name__', v)}" for k, v in kw.items())


def schedule_comparisons() -> tuple[list[Comparison], list[str]]:
    """Closed form and restored-run comparisons for every case."""
    import torch

    u = torch.finfo(torch.float64).eps / 2
    comps: list[Comparison] = []
    problems: list[str] = []
    for name, kw in scheduler_cases():
        label = f"{name}({describe(kw)})"
        make, plateau = build(name, kw), name == "ReduceLROnPlateau"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                got = run(make, plateau, EPOCHS)
                resumed = run(make, plateau, EPOCHS, resume_at=EPOCHS // 2 - 1)
            except Exception as exc:  # a scheduler that cannot be built, stepped or restored is a finding
                problems.append(f"{label}: {type(exc).__name__}: {exc}"[:300])
                continue
        want = torch.tensor(expected(name, kw), dtype=torch.float64)
        scale = float(want.abs().max())
        comps.append(compare(torch.tensor(got, dtype=torch.float64), want, op=f"{label} lr/momentum per epoch",
                             device="cpu", dtype="float64", atol=EPOCHS * 16 * u * scale, rtol=0.0))
        comps.append(compare(torch.tensor(resumed, dtype=torch.float64), torch.tensor(got, dtype=torch.float64),
                             op=f"{label} restored from state_dict at epoch {EPOCHS // 2 - 1}", device="cpu",
                             dtype="float64", atol=0.0, rtol=0.0))
    return comps, problems


def sched_closed_form(ctx: Context) -> Result:
    """LR schedulers, alone, composed and restored, follow their documented schedules."""
    comparisons, problems = schedule_comparisons()
    return comparisons_result("LR schedulers vs closed forms", comparisons, problems=problems,
                              tolerances={"closed_form": f"{EPOCHS}·16·u64·max lr", "restored": "bitwise"},
                              extra={"cases": len(scheduler_cases())},
                              remediation="an LR scheduler follows a different schedule than documented, or does "
                                          "not resume from its state_dict; pin the scheduler behaviour you need "
                                          "(LambdaLR with your own formula) and reinstall torch")
