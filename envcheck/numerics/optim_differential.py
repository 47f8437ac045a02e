"""optim.differential: every torch.optim optimizer, single-tensor vs foreach vs fused, across its options, each
compared with a float64 reference step written from the documented algorithm (optim_reference.py).

Quick level drives torch's private functional kernels of SGD, Adam and AdamW directly (torch.optim.<mod>.
_single_tensor_*/_multi_tensor_*/_fused_*): constructing any torch.optim.Optimizer imports torch._dynamo (~0.8 s),
more than the whole quick budget. Full level constructs every optimizer class and steps it, as training does.

Tolerance (float32 run vs float64 reference, K steps): every documented update is at most N_OPS = 32 floating-point
operations per element and step, each rounding with relative error u = eps/2 on values bounded by the parameter and
its update (<= 1 + max|p|), so the forward error after K steps is at most K·N_OPS·u·(1 + max|p|) (the standard
first-order model, Higham 2002, §2.2). No measured noise enters the bound.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from envcheck.core.check import Context, Level
from envcheck.core.result import Result
from envcheck.reference.compare import Comparison, Tensor, compare, comparisons_result
from envcheck.reference.devices import check_devices, numerics_mode
from envcheck.reference.optimizers import REFERENCES

STEPS, N_OPS = 6, 32
GRAD_SCALES = (1.0, 3.0, 0.05, 0.05, 2.0, 0.5)  # a shrinking gradient makes amsgrad's max differ from v
B = (
    0.9,
    0.9,
)  # a short second-moment memory: v falls within the steps (amsgrad) and RAdam rectifies by step 6
OPTIONS: dict[str, tuple[float, list[dict[str, Any]]]] = {
    "SGD": (
        0.1,
        [
            {},
            {"momentum": 0.9},
            {"momentum": 0.9, "nesterov": True},
            {"momentum": 0.9, "dampening": 0.3, "weight_decay": 0.1},
            {"momentum": 0.9, "weight_decay": 0.1, "maximize": True},
        ],
    ),
    "Adam": (
        0.1,
        [
            {},
            {"amsgrad": True, "betas": B},
            {"weight_decay": 0.1},
            {"weight_decay": 0.1, "maximize": True},
            {"amsgrad": True, "betas": B, "maximize": True},
        ],
    ),
    "AdamW": (
        0.1,
        [{"weight_decay": 0.1}, {"amsgrad": True, "betas": B, "weight_decay": 0.1}, {"maximize": True}],
    ),
    "Adagrad": (
        0.1,
        [{}, {"lr_decay": 0.1, "weight_decay": 0.1, "initial_accumulator_value": 0.1}, {"maximize": True}],
    ),
    "RMSprop": (
        0.01,
        [
            {},
            {"centered": True},
            {"momentum": 0.9, "centered": True, "weight_decay": 0.1},
            {"momentum": 0.9, "maximize": True},
        ],
    ),
    "Adamax": (0.1, [{}, {"weight_decay": 0.1}, {"maximize": True}]),
    "NAdam": (
        0.1,
        [
            {},
            {"weight_decay": 0.1},
            {"decoupled_weight_decay": True, "weight_decay": 0.1},
            {"maximize": True},
        ],
    ),
    "RAdam": (
        0.1,
        [
            {"betas": B},
            {"betas": B, "eps": 0.1},
            {"betas": B, "weight_decay": 0.1},
            {"betas": B, "decoupled_weight_decay": True, "weight_decay": 0.1},
            {"betas": B, "maximize": True},
        ],
    ),
    "Adadelta": (1.0, [{}, {"weight_decay": 0.1}, {"maximize": True}]),
    "Rprop": (0.01, [{}, {"maximize": True}, {"etas": (0.3, 1.5)}]),
    "ASGD": (0.1, [{}, {"t0": 2.0}, {"weight_decay": 0.1, "maximize": True}]),
}
QUICK = ("SGD", "Adam", "AdamW")
IMPLS = ("single", "foreach", "fused")
FUNCTIONAL = {"SGD": ("sgd", "sgd"), "Adam": ("adam", "adam"), "AdamW": ("adam", "adam")}
Driver = Callable[[str, dict[str, Any], str, list[Tensor], list[list[Tensor]]], "list[Tensor] | None"]


def problem(device: str) -> tuple[list[Tensor], list[list[Tensor]]]:
    """Two float32 parameters (a matrix and a vector) and STEPS gradient lists of varying scale and sign."""
    import torch

    gen = torch.Generator().manual_seed(0)
    params = [torch.randn(3, 4, generator=gen), torch.randn(5, generator=gen)]
    grads = [[s * torch.randn(p.shape, generator=gen) for p in params] for s in GRAD_SCALES]
    return [p.to(device) for p in params], [[g.to(device) for g in gs] for gs in grads]


def class_driver(
    name: str, opts: dict[str, Any], impl: str, params: list[Tensor], grads: list[list[Tensor]]
) -> list[Tensor] | None:
    """Step torch.optim.<name> as training does; None when this implementation does not exist here."""
    import torch

    ps = [torch.nn.Parameter(p.clone()) for p in params]
    flag = {"single": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}[impl]
    try:
        opt = getattr(torch.optim, name)(ps, **opts, **flag)
        for gs in grads:
            for p, g in zip(ps, gs, strict=True):
                p.grad = g.clone()
            opt.step()
    except (RuntimeError, TypeError, ValueError) as exc:
        if impl == "fused" and ("fused" in str(exc) or "support" in str(exc)):
            return None
        raise
    return [p.detach() for p in ps]


def functional_driver(
    name: str, opts: dict[str, Any], impl: str, params: list[Tensor], grads: list[list[Tensor]]
) -> list[Tensor] | None:
    """Call torch.optim.<mod>._single_tensor_/_multi_tensor_/_fused_<fn> with state lists of our own."""
    import importlib

    import torch

    mod_name, fn = FUNCTIONAL[name]
    module = importlib.import_module(f"torch.optim.{mod_name}")
    func = getattr(
        module,
        {"single": "_single_tensor_", "foreach": "_multi_tensor_", "fused": "_fused_"}[impl] + fn,
        None,
    )
    if func is None or (impl == "fused" and params[0].device.type not in ("cpu", "cuda")):
        return None
    ps = [p.clone() for p in params]

    def zeros() -> list[Tensor]:
        return [torch.zeros_like(p) for p in ps]

    beta1, beta2 = opts.get("betas", (0.9, 0.999))
    values: dict[str, Any] = {
        "params": ps,
        "momentum_buffer_list": [None] * len(ps),
        "exp_avgs": zeros(),
        "exp_avg_sqs": zeros(),
        "max_exp_avg_sqs": zeros() if opts.get("amsgrad") else [],
        "state_steps": [torch.zeros((), device=p.device) for p in ps],
        "grad_scale": None,
        "found_inf": None,
        "has_complex": False,
        "has_sparse_grad": False,
        "capturable": False,
        "differentiable": False,
        "beta1": beta1,
        "beta2": beta2,
        "eps": 1e-8,
        "weight_decay": 1e-2 if name == "AdamW" else 0.0,
        "momentum": 0.0,
        "dampening": 0.0,
        "nesterov": False,
        "maximize": False,
        "amsgrad": False,
        "decoupled_weight_decay": name == "AdamW",
        **{k: v for k, v in opts.items() if k != "betas"},
    }
    names = list(inspect.signature(func).parameters)
    missing = [
        n
        for n in names
        if n not in values
        and n not in ("grads", "d_p_list")
        and inspect.signature(func).parameters[n].default is inspect.Parameter.empty
    ]
    if missing:
        raise LookupError(
            f"{func.__qualname__} takes {missing}, unknown to this check (torch changed its internals)"
        )
    for gs in grads:
        call = {n: values[n] for n in names if n in values}
        call.update({n: [g.clone() for g in gs] for n in names if n in ("grads", "d_p_list")})
        with torch.no_grad():
            func(**call)
    return ps


def optim_comparisons(
    device: str, names: tuple[str, ...], driver: Driver
) -> tuple[list[Comparison], list[str]]:
    """Every (optimizer, options, implementation) against its float64 reference on `device`."""
    import torch

    params, grads = problem(device)
    out: list[Comparison] = []
    absent: list[str] = []
    u = torch.finfo(torch.float32).eps / 2
    for name in names:
        lr, option_sets = OPTIONS[name]
        for raw in option_sets:
            opts = {"lr": lr, **raw}
            ref = [p.double().cpu() for p in params]
            step = REFERENCES[name](dict(opts))
            for gs in grads:
                step(ref, [g.double().cpu() for g in gs])
            scale = 1 + max(float(r.abs().max()) for r in ref)
            atol = STEPS * N_OPS * u * scale
            label_opts = ",".join(f"{k}={v}" for k, v in raw.items()) or "defaults"
            for impl in IMPLS:
                got = driver(name, opts, impl, params, grads)
                if got is None:
                    absent.append(f"{name}/{impl}@{device}")
                    continue
                for i, (g, r) in enumerate(zip(got, ref, strict=True)):
                    out.append(
                        compare(
                            g,
                            r,
                            op=f"{name}({label_opts}) {impl} param{i} after {STEPS} steps",
                            device=device,
                            dtype="float32",
                            atol=atol,
                            rtol=0.0,
                        )
                    )
    return out, sorted(set(absent))


def uncovered_optimizers() -> list[str]:
    """torch.optim optimizer classes this check has no float64 reference for (reported, not compared)."""
    import torch

    return sorted(
        n
        for n in dir(torch.optim)
        if isinstance(getattr(torch.optim, n), type)
        and issubclass(getattr(torch.optim, n), torch.optim.Optimizer)
        and n != "Optimizer"
        and n not in OPTIONS
    )


def optim_differential(ctx: Context, driver: Driver | None = None) -> Result:
    """Each optimizer implementation matches its float64 reference across option sets, on every device."""
    quick = ctx.level is Level.QUICK
    names = QUICK if quick else tuple(OPTIONS)
    chosen = driver or (functional_driver if quick else class_driver)
    comparisons: list[Comparison] = []
    absent: list[str] = []
    problems: list[str] = []
    with numerics_mode():
        for device in check_devices():
            try:
                found, missing = optim_comparisons(device, names, chosen)
            except LookupError as exc:
                return _skip_changed(str(exc))
            comparisons += found
            absent += missing
    extra = {
        "implementations_absent": absent,
        "no_reference": [] if quick else uncovered_optimizers(),
        "driver": "functional kernels" if chosen is functional_driver else "optimizer classes",
    }
    tolerances = {"atol": f"{STEPS}·{N_OPS}·u·(1+max|p|), u = float32 eps/2 (Higham 2002 §2.2)", "rtol": 0}
    return comparisons_result(
        f"optimizers vs float64 reference ({', '.join(names)})",
        comparisons,
        tolerances=tolerances,
        extra=extra,
        problems=problems,
        remediation="an optimizer implementation computes a wrong step; pin the optimizer "
        "implementation that passes (foreach=False) and reinstall torch",
    )


def _skip_changed(why: str) -> Result:
    from envcheck.core.result import skipped

    return skipped(f"optimizer kernels not checkable on this torch: {why}")
