"""Float64 reference steps for torch.optim's optimizers, written from their documented algorithms, not torch's code.

Each reference takes the parameter list (float64), the gradient list (float64) and the options, keeps its own state
and updates the parameters in place. The conventions follow the torch.optim documentation pages: `maximize` negates
the gradient first, then weight decay is added (or, decoupled, the parameter is shrunk by lr·wd).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

Tensor = Any
Step = Callable[[list[Tensor], list[Tensor]], None]


def _grad(g: Tensor, p: Tensor, o: dict[str, Any], coupled: bool = True) -> Tensor:
    g = -g if o.get("maximize") else g
    if o.get("weight_decay", 0) and coupled and not o.get("decoupled_weight_decay"):
        g = g + o["weight_decay"] * p
    elif o.get("weight_decay", 0) and o.get("decoupled_weight_decay"):
        p.mul_(1 - o["lr"] * o["weight_decay"])
    return g


def sgd(o: dict[str, Any]) -> Step:
    """SGD with momentum, dampening, nesterov, weight decay, maximize."""
    bufs: dict[int, Tensor] = {}
    mom, damp = o.get("momentum", 0.0), o.get("dampening", 0.0)

    def step(ps: list[Tensor], gs: list[Tensor]) -> None:
        for i, (p, g) in enumerate(zip(ps, gs, strict=True)):
            g = _grad(g, p, o)
            if mom:
                bufs[i] = g.clone() if i not in bufs else mom * bufs[i] + (1 - damp) * g
                g = g + mom * bufs[i] if o.get("nesterov") else bufs[i]
            p.sub_(o["lr"] * g)

    return step


def adam(o: dict[str, Any]) -> Step:
    """Adam / AdamW (decoupled_weight_decay) with amsgrad and maximize."""
    b1, b2 = o.get("betas", (0.9, 0.999))
    eps = o.get("eps", 1e-8)
    st: dict[str, Any] = {"t": 0, "m": {}, "v": {}, "vmax": {}}

    def step(ps: list[Tensor], gs: list[Tensor]) -> None:
        st["t"] += 1
        t = st["t"]
        for i, (p, g) in enumerate(zip(ps, gs, strict=True)):
            g = _grad(g, p, o)
            m = st["m"][i] = b1 * st["m"].get(i, 0 * p) + (1 - b1) * g
            v = st["v"][i] = b2 * st["v"].get(i, 0 * p) + (1 - b2) * g * g
            if o.get("amsgrad"):
                v = st["vmax"][i] = st["vmax"].get(i, 0 * p).maximum(v)
            denom = v.sqrt() / math.sqrt(1 - b2**t) + eps
            p.sub_(o["lr"] / (1 - b1**t) * m / denom)

    return step


def adamw(o: dict[str, Any]) -> Step:
    """AdamW: Adam with decoupled weight decay (default weight_decay 1e-2)."""
    return adam({"weight_decay": 1e-2, **o, "decoupled_weight_decay": True})


def adagrad(o: dict[str, Any]) -> Step:
    """Adagrad with lr_decay, initial accumulator, weight decay, maximize."""
    st: dict[str, Any] = {"t": 0, "sum": {}}
    eps = o.get("eps", 1e-10)

    def step(ps: list[Tensor], gs: list[Tensor]) -> None:
        st["t"] += 1
        clr = o["lr"] / (1 + (st["t"] - 1) * o.get("lr_decay", 0.0))
        for i, (p, g) in enumerate(zip(ps, gs, strict=True)):
            g = _grad(g, p, o)
            s = st["sum"][i] = st["sum"].get(i, 0 * p + o.get("initial_accumulator_value", 0.0)) + g * g
            p.sub_(clr * g / (s.sqrt() + eps))

    return step


def rmsprop(o: dict[str, Any]) -> Step:
    """RMSprop with centering, momentum, weight decay, maximize."""
    a, eps, mom = o.get("alpha", 0.99), o.get("eps", 1e-8), o.get("momentum", 0.0)
    st: dict[str, dict[int, Tensor]] = {"v": {}, "ga": {}, "buf": {}}

    def step(ps: list[Tensor], gs: list[Tensor]) -> None:
        for i, (p, g) in enumerate(zip(ps, gs, strict=True)):
            g = _grad(g, p, o)
            v = st["v"][i] = a * st["v"].get(i, 0 * p) + (1 - a) * g * g
            if o.get("centered"):
                ga = st["ga"][i] = a * st["ga"].get(i, 0 * p) + (1 - a) * g
                v = v - ga * ga
            avg = v.sqrt() + eps
            if mom:
                buf = st["buf"][i] = mom * st["buf"].get(i, 0 * p) + g / avg
                p.sub_(o["lr"] * buf)
            else:
                p.sub_(o["lr"] * g / avg)

    return step


def adamax(o: dict[str, Any]) -> Step:
    """Adamax (infinity-norm Adam) with weight decay, maximize."""
    b1, b2 = o.get("betas", (0.9, 0.999))
    eps = o.get("eps", 1e-8)
    st: dict[str, Any] = {"t": 0, "m": {}, "u": {}}

    def step(ps: list[Tensor], gs: list[Tensor]) -> None:
        st["t"] += 1
        for i, (p, g) in enumerate(zip(ps, gs, strict=True)):
            g = _grad(g, p, o)
            m = st["m"][i] = b1 * st["m"].get(i, 0 * p) + (1 - b1) * g
            u = st["u"][i] = (b2 * st["u"].get(i, 0 * p)).maximum(g.abs() + eps)
            p.sub_(o["lr"] / (1 - b1 ** st["t"]) * m / u)

    return step


def nadam(o: dict[str, Any]) -> Step:
    """NAdam (Dozat 2016) with momentum decay, (decoupled) weight decay, maximize."""
    b1, b2 = o.get("betas", (0.9, 0.999))
    eps, psi = o.get("eps", 1e-8), o.get("momentum_decay", 4e-3)
    st: dict[str, Any] = {"t": 0, "prod": 1.0, "m": {}, "v": {}}

    def step(ps: list[Tensor], gs: list[Tensor]) -> None:
        st["t"] += 1
        t = st["t"]
        mu, mu_next = b1 * (1 - 0.5 * 0.96 ** (t * psi)), b1 * (1 - 0.5 * 0.96 ** ((t + 1) * psi))
        st["prod"] *= mu
        prod = st["prod"]
        for i, (p, g) in enumerate(zip(ps, gs, strict=True)):
            g = _grad(g, p, o)
            m = st["m"][i] = b1 * st["m"].get(i, 0 * p) + (1 - b1) * g
            v = st["v"][i] = b2 * st["v"].get(i, 0 * p) + (1 - b2) * g * g
            denom = (v / (1 - b2**t)).sqrt() + eps
            p.sub_(o["lr"] * (1 - mu) / (1 - prod) * g / denom)
            p.sub_(o["lr"] * mu_next / (1 - prod * mu_next) * m / denom)

    return step


def radam(o: dict[str, Any]) -> Step:
    """RAdam (Liu et al. 2019): the rectified step once rho_t > 5, plain momentum before."""
    b1, b2 = o.get("betas", (0.9, 0.999))
    eps = o.get("eps", 1e-8)
    st: dict[str, Any] = {"t": 0, "m": {}, "v": {}}
    rho_inf = 2 / (1 - b2) - 1

    def step(ps: list[Tensor], gs: list[Tensor]) -> None:
        st["t"] += 1
        t = st["t"]
        bc2 = 1 - b2**t
        rho = rho_inf - 2 * t * b2**t / bc2
        for i, (p, g) in enumerate(zip(ps, gs, strict=True)):
            g = _grad(g, p, o)
            m = st["m"][i] = b1 * st["m"].get(i, 0 * p) + (1 - b1) * g
            v = st["v"][i] = b2 * st["v"].get(i, 0 * p) + (1 - b2) * g * g
            m_hat = m / (1 - b1**t)
            if rho > 5:
                rect = math.sqrt((rho - 4) * (rho - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho))
                p.sub_(o["lr"] * m_hat * rect * math.sqrt(bc2) / (v.sqrt() + eps))
            else:
                p.sub_(o["lr"] * m_hat)

    return step


def adadelta(o: dict[str, Any]) -> Step:
    """Adadelta (Zeiler 2012) with lr, weight decay, maximize."""
    rho, eps = o.get("rho", 0.9), o.get("eps", 1e-6)
    st: dict[str, dict[int, Tensor]] = {"v": {}, "d": {}}

    def step(ps: list[Tensor], gs: list[Tensor]) -> None:
        for i, (p, g) in enumerate(zip(ps, gs, strict=True)):
            g = _grad(g, p, o)
            v = st["v"][i] = rho * st["v"].get(i, 0 * p) + (1 - rho) * g * g
            delta = (st["d"].get(i, 0 * p) + eps).sqrt() / (v + eps).sqrt() * g
            st["d"][i] = rho * st["d"].get(i, 0 * p) + (1 - rho) * delta * delta
            p.sub_(o["lr"] * delta)

    return step


def rprop(o: dict[str, Any]) -> Step:
    """Rprop: per-element step sizes grown/shrunk by the sign agreement of successive gradients."""
    lo_eta, hi_eta = o.get("etas", (0.5, 1.2))
    lo, hi = o.get("step_sizes", (1e-6, 50))
    st: dict[str, dict[int, Tensor]] = {"prev": {}, "size": {}}

    def step(ps: list[Tensor], gs: list[Tensor]) -> None:
        for i, (p, g) in enumerate(zip(ps, gs, strict=True)):
            g = _grad(g, p, o, coupled=False)
            sign = (g * st["prev"].get(i, 0 * p)).sign()
            factor = 1.0 * (sign == 0) + hi_eta * (sign > 0) + lo_eta * (sign < 0)
            size = st["size"][i] = (st["size"].get(i, 0 * p + o["lr"]) * factor).clamp(lo, hi)
            g = g * (sign >= 0)
            p.sub_(g.sign() * size)
            st["prev"][i] = g

    return step


def asgd(o: dict[str, Any]) -> Step:
    """ASGD (Polyak averaging): decay, step with the previous eta, then update eta and mu."""
    lam, alpha = o.get("lambd", 1e-4), o.get("alpha", 0.75)  # t0 only drives the average ax, which is state
    st: dict[str, Any] = {"t": 0, "eta": o["lr"]}

    def step(ps: list[Tensor], gs: list[Tensor]) -> None:
        st["t"] += 1
        for p, g in zip(ps, gs, strict=True):
            g = _grad(g, p, o)
            p.mul_(1 - lam * st["eta"]).sub_(st["eta"] * g)
        st["eta"] = o["lr"] / (1 + lam * o["lr"] * st["t"]) ** alpha

    return step


REFERENCES: dict[str, Callable[[dict[str, Any]], Step]] = {
    "SGD": sgd,
    "Adam": adam,
    "AdamW": adamw,
    "Adagrad": adagrad,
    "RMSprop": rmsprop,
    "Adamax": adamax,
    "NAdam": nadam,
    "RAdam": radam,
    "Adadelta": adadelta,
    "Rprop": rprop,
    "ASGD": asgd,
}
