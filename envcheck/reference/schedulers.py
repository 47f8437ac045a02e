"""Learning-rate schedules in closed form, as the torch.optim.lr_scheduler documentation states them, in float64
Python: lr(t) for epoch t of a parameter group with base learning rate `base` (and the momentum CyclicLR/OneCycleLR
cycle). ReduceLROnPlateau has no closed form in t; `plateau` replays its documented rule on the metric sequence.
Shares no code with torch: the check compares torch's (recursive, "chainable") schedulers with these.
"""

from __future__ import annotations

import itertools
import math
from bisect import bisect_right
from collections.abc import Callable, Sequence
from typing import Any

Form = Callable[[float, int], float]  # (base lr, epoch) -> lr


def _cos(start: float, end: float, pct: float) -> float:
    return end + (start - end) / 2 * (math.cos(math.pi * pct) + 1)


def closed_form(name: str, kw: dict[str, Any]) -> Form:
    """The documented lr(t) of scheduler `name` constructed with keyword arguments `kw`."""
    if name == "StepLR":
        return lambda b, t: b * kw.get("gamma", 0.1) ** (t // kw["step_size"])
    if name == "MultiStepLR":
        return lambda b, t: b * kw.get("gamma", 0.1) ** bisect_right(sorted(kw["milestones"]), t)
    if name == "ConstantLR":
        return lambda b, t: b * (kw.get("factor", 1 / 3) if t < kw.get("total_iters", 5) else 1.0)
    if name == "LinearLR":
        s, e, n = kw.get("start_factor", 1 / 3), kw.get("end_factor", 1.0), kw.get("total_iters", 5)
        return lambda b, t: b * (s + (e - s) * min(t, n) / n)
    if name == "ExponentialLR":
        return lambda b, t: b * kw["gamma"] ** t
    if name == "PolynomialLR":
        n, p = kw.get("total_iters", 5), kw.get("power", 1.0)
        return lambda b, t: b * (1 - min(t, n) / n) ** p
    if name == "CosineAnnealingLR":
        tmax, eta = kw["T_max"], kw.get("eta_min", 0.0)
        return lambda b, t: eta + (b - eta) * (1 + math.cos(math.pi * t / tmax)) / 2
    if name == "CosineAnnealingWarmRestarts":
        return lambda b, t: _warm_restarts(b, t, kw["T_0"], kw.get("T_mult", 1), kw.get("eta_min", 0.0))
    if name == "LambdaLR":
        return lambda b, t: b * kw["lr_lambda"](t)
    if name == "MultiplicativeLR":
        return lambda b, t: b * math.prod(kw["lr_lambda"](i) for i in range(1, t + 1))
    if name == "CyclicLR":
        return lambda b, t: cyclic(kw, t)[0]
    if name == "OneCycleLR":
        return lambda b, t: one_cycle(kw, t)[0]
    raise KeyError(f"no closed form for {name}")


def _warm_restarts(base: float, t: int, t0: int, mult: int, eta: float) -> float:
    if mult == 1 or t < t0:
        cur, period = t % t0, t0
    else:
        n = int(math.log(t / t0 * (mult - 1) + 1, mult))
        cur, period = t - t0 * (mult**n - 1) // (mult - 1), t0 * mult**n
        if cur >= period:  # the log can land one period short in floating point
            cur, period = cur - period, period * mult
    return eta + (base - eta) * (1 + math.cos(math.pi * cur / period)) / 2


def cyclic(kw: dict[str, Any], t: int) -> tuple[float, float]:
    """CyclicLR's (lr, momentum) at iteration t (docs: Smith 2017, the three modes)."""
    up = kw.get("step_size_up", 2000)
    down = kw.get("step_size_down") or up
    total, ratio = up + down, up / (up + down)
    cycle = math.floor(1 + t / total)
    x = 1.0 + t / total - cycle
    scale = x / ratio if x <= ratio else (x - 1) / (ratio - 1)
    mode = kw.get("mode", "triangular")
    amp = {"triangular": 1.0, "triangular2": 1 / 2.0 ** (cycle - 1), "exp_range": kw.get("gamma", 1.0) ** t}[
        mode
    ]
    lr = kw["base_lr"] + (kw["max_lr"] - kw["base_lr"]) * scale * amp
    mom = (
        kw.get("max_momentum", 0.9)
        - (kw.get("max_momentum", 0.9) - kw.get("base_momentum", 0.8)) * scale * amp
    )
    return lr, mom


def one_cycle(kw: dict[str, Any], t: int) -> tuple[float, float]:
    """OneCycleLR's (lr, momentum) at step t (Smith & Topin 2018, two or three phases)."""
    total, pct = kw["total_steps"], kw.get("pct_start", 0.3)
    initial = kw["max_lr"] / kw.get("div_factor", 25.0)
    final = initial / kw.get("final_div_factor", 1e4)
    mx_m, base_m = kw.get("max_momentum", 0.95), kw.get("base_momentum", 0.85)
    if kw.get("three_phase", False):
        phases = [
            (float(pct * total) - 1, initial, kw["max_lr"], mx_m, base_m),
            (float(2 * pct * total) - 2, kw["max_lr"], initial, base_m, mx_m),
            (total - 1, initial, final, mx_m, mx_m),
        ]
    else:
        phases = [
            (float(pct * total) - 1, initial, kw["max_lr"], mx_m, base_m),
            (total - 1, kw["max_lr"], final, base_m, mx_m),
        ]
    start = 0.0
    anneal = _cos if kw.get("anneal_strategy", "cos") == "cos" else (lambda a, b, p: (b - a) * p + a)
    for i, (end, lr_a, lr_b, m_a, m_b) in enumerate(phases):
        if t <= end or i == len(phases) - 1:
            p = (t - start) / (end - start)
            return anneal(lr_a, lr_b, p), anneal(m_a, m_b, p)
        start = end
    raise AssertionError("unreachable")


def sequential(forms: Sequence[Form], milestones: Sequence[int]) -> Form:
    """SequentialLR: scheduler i runs from milestone i-1 with its own epoch count starting at 0."""

    def lr(base: float, t: int) -> float:
        i = bisect_right(list(milestones), t)
        return forms[i](base, t - (milestones[i - 1] if i else 0))

    return lr


def chained(forms: Sequence[Form]) -> Form:
    """ChainedScheduler of multiplicative schedulers: the product of their factors."""
    return lambda base, t: base * math.prod(f(base, t) / base for f in forms)


def plateau(kw: dict[str, Any], base: float, metrics: Sequence[float]) -> list[float]:
    """ReduceLROnPlateau's lr after each metric, replaying its documented rule."""
    mode, rel = kw.get("mode", "min"), kw.get("threshold_mode", "rel") == "rel"
    th, factor, patience = kw.get("threshold", 1e-4), kw.get("factor", 0.1), kw.get("patience", 10)
    cooldown, min_lr, eps = kw.get("cooldown", 0), kw.get("min_lr", 0.0), kw.get("eps", 1e-8)
    best = math.inf if mode == "min" else -math.inf
    bad = cool = 0
    lr, out = base, []
    for a in metrics:
        if mode == "min":
            better = a < (best * (1 - th) if rel else best - th)
        else:
            better = a > (best * (1 + th) if rel else best + th)
        best, bad = (a, 0) if better else (best, bad + 1)
        if cool > 0:
            cool, bad = cool - 1, 0
        if bad > patience:
            new = max(lr * factor, min_lr)
            if lr - new > eps:
                lr = new
            cool, bad = cooldown, 0
        out.append(lr)
    return out


# The option space sched.closed_form evaluates: every scheduler's option product, and compositions, on two parameter
# groups (base lr 0.1 and 0.02) with SGD momentum 0.9, for EPOCHS epochs; ReduceLROnPlateau reads METRIC.
EPOCHS, BASES = 24, (0.1, 0.02)
METRIC = (
    1.0,
    0.9,
    0.95,
    0.95,
    0.96,
    0.8,
    0.8,
    0.81,
    0.82,
    0.83,
    0.7,
    0.7,
    0.7,
    0.7,
    0.7,
    0.69,
    0.6,
    0.6,
    0.61,
    0.62,
    0.63,
    0.64,
    0.5,
    0.5,
)
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
    "CyclicLR": [
        {"base_lr": 0.01, "max_lr": 0.1, "step_size_up": 3, **o}
        for o in _product(
            mode=("triangular", "triangular2", "exp_range"),
            step_size_down=(None, 5),
            cycle_momentum=(True, False),
        )
    ],
    "OneCycleLR": [
        {"max_lr": 0.1, "total_steps": EPOCHS + 1, **o}
        for o in _product(anneal_strategy=("cos", "linear"), three_phase=(False, True), pct_start=(0.3, 0.25))
    ],
    "ReduceLROnPlateau": _product(
        mode=("min", "max"), threshold_mode=("rel", "abs"), cooldown=(0, 2), patience=(1, 3), factor=(0.5,)
    ),
}
for _o in OPTIONS["CyclicLR"]:
    if _o["mode"] == "exp_range":
        _o["gamma"] = 0.9
COMPOSED: dict[str, tuple[str, list[tuple[str, dict[str, Any]]], list[int]]] = {
    "warmup then cosine": (
        "SequentialLR",
        [("LinearLR", {"start_factor": 0.1, "total_iters": 4}), ("CosineAnnealingLR", {"T_max": 12})],
        [4],
    ),
    "constant, exponential, step": (
        "SequentialLR",
        [
            ("ConstantLR", {"factor": 0.5, "total_iters": 10}),
            ("ExponentialLR", {"gamma": 0.9}),
            ("StepLR", {"step_size": 2, "gamma": 0.5}),
        ],
        [3, 7],
    ),
    "two constants": (
        "SequentialLR",
        [
            ("ConstantLR", {"factor": 0.5, "total_iters": 3}),
            ("ConstantLR", {"factor": 0.3, "total_iters": 4}),
        ],
        [3],
    ),
    "constant x exponential": (
        "ChainedScheduler",
        [("ConstantLR", {"factor": 0.5, "total_iters": 4}), ("ExponentialLR", {"gamma": 0.9})],
        [],
    ),
    "linear x step": (
        "ChainedScheduler",
        [("LinearLR", {"start_factor": 0.2, "total_iters": 5}), ("StepLR", {"step_size": 3, "gamma": 0.5})],
        [],
    ),
}


def expected(name: str, kw: dict[str, Any]) -> list[list[float]]:
    """The documented schedule for both groups (and momentum) over EPOCHS."""
    if name == "ReduceLROnPlateau":
        lrs = [plateau(kw, b, METRIC[: EPOCHS - 1]) for b in BASES]
        return [[b for b in BASES] + [MOMENTUM]] + [
            [lrs[0][t], lrs[1][t], MOMENTUM] for t in range(EPOCHS - 1)
        ]
    if name in COMPOSED:
        kind, parts, milestones = COMPOSED[name]
        forms = [closed_form(n, k) for n, k in parts]
        form = sequential(forms, milestones) if kind == "SequentialLR" else chained(forms)
        return [[form(BASES[0], t), form(BASES[1], t), MOMENTUM] for t in range(EPOCHS)]
    if name in ("CyclicLR", "OneCycleLR"):
        cycle = cyclic if name == "CyclicLR" else one_cycle
        rows = []
        for t in range(EPOCHS):
            lr, mom = cycle(kw, t)
            rows.append([lr, lr, mom if kw.get("cycle_momentum", True) else MOMENTUM])
        return rows
    form = closed_form(name, kw)
    return [[form(BASES[0], t), form(BASES[1], t), MOMENTUM] for t in range(EPOCHS)]
