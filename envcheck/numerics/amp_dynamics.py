"""amp.dynamics: autocast's cast cache across a no_grad pass, GradScaler's scale over hundreds of steps against the
documented rule simulated independently, and unscale_ then clip then step against a float64 reference.

GradScaler's documented rule (torch.amp.GradScaler docs): a step whose gradients hold inf/NaN is skipped and the
scale is multiplied by backoff_factor; after growth_interval consecutive finite steps it is multiplied by
growth_factor. The update kernel (aten/src/ATen/native/cpu/AmpGradScalerKernels.cpp, _amp_update_scale_) grows
only when the grown scale is still finite. Scales are powers of two here, so every expected value is exact.
"""

from __future__ import annotations

from typing import Any

from envcheck.core.check import Context
from envcheck.core.result import Result
from envcheck.numerics.grad_scaler import PlainSGD, real_grad_scaler
from envcheck.reference.compare import Comparison, compare, comparisons_result
from envcheck.reference.devices import check_devices, numerics_mode

# STEPS: the documented rule's scale last changes at update 203 (the second climb back to float32's top after the inf
# run ending at 161); two growth intervals more show that it stays there (a scaler that grows past the top reaches inf
# within one interval). The 96 steps beyond that the check once ran repeated the same top and only cost time.
STEPS, INTERVAL, LR, MAX_NORM = 203 + 2 * 7 + 1, 7, 0.05, 0.5
INF_AT = frozenset({3, 4, 40, 41, 42, 150, 151, 152, 153, 154, 155, 156, 157, 158, 159, 160, 161})
CAST_TOL = {"atol": 1e-6, "rtol": 1e-6}  # the same low-precision arithmetic twice: identical in practice


def low_dtype(device: str) -> Any:
    """Autocast's default low-precision dtype: bfloat16 on CPU, float16 on CUDA."""
    import torch

    return torch.bfloat16 if device == "cpu" else torch.float16


def cast_cache_comparisons(device: str) -> list[Comparison]:
    """Inside one autocast region, a no_grad pass first must not leave the weight's grad empty or different."""
    import torch

    torch.manual_seed(0)
    layer = torch.nn.Linear(8, 4).to(device)
    x = torch.randn(5, 8, device=device)
    kind = device.split(":")[0]

    def grads(no_grad_first: bool) -> tuple[Any, Any]:
        layer.zero_grad(set_to_none=True)
        with torch.autocast(kind, dtype=low_dtype(device)):
            if no_grad_first:
                with torch.no_grad():
                    layer(x)
            out = layer(x)
        out.float().square().sum().backward()
        missing = torch.full_like(layer.weight, float("nan"))
        return (layer.weight.grad if layer.weight.grad is not None else missing), out.detach()

    want, out_want = grads(False)
    got, out_got = grads(True)
    return [
        compare(
            got,
            want,
            op="weight.grad after a no_grad pass in the same autocast region",
            device=device,
            dtype=str(low_dtype(device)).removeprefix("torch."),
            **CAST_TOL,
        ),
        compare(
            out_got,
            out_want,
            op="autocast output after a no_grad pass",
            device=device,
            dtype=str(low_dtype(device)).removeprefix("torch."),
            **CAST_TOL,
        ),
    ]


def expected_scales(init: float, growth: float, backoff: float) -> list[float]:
    """The documented rule, simulated: the scale after each of STEPS updates."""
    scale, tracker, out = init, 0, []
    for i in range(STEPS):
        if i in INF_AT:
            scale, tracker = scale * backoff, 0
        else:
            tracker += 1
            if tracker == INTERVAL:
                grown = scale * growth
                scale, tracker = (grown if grown < 2.0**128 else scale), 0
        out.append(scale)
    return out


def scaler_problems(device: str, make_scaler: Any = real_grad_scaler) -> tuple[dict[str, Any], list[str]]:
    """Drive GradScaler STEPS times with inf at INF_AT; compare scales, skips and the unscale→clip→step result."""
    import torch

    init, growth, backoff = 2.0**100, 4.0, 0.5  # starts near float32's top: growth must stop below overflow
    scaler = make_scaler(
        device.split(":")[0],
        init_scale=init,
        growth_factor=growth,
        backoff_factor=backoff,
        growth_interval=INTERVAL,
    )
    gen = torch.Generator().manual_seed(0)
    p = torch.nn.Parameter(torch.randn(6, generator=gen).to(device))
    ref = p.detach().double().cpu().clone()
    target = torch.randn(6, generator=gen)
    opt = PlainSGD([p], LR)
    scales: list[float] = []
    problems: list[str] = []
    for i in range(STEPS):
        opt.zero_grad()
        loss = ((p - target.to(device)) ** 2).sum() * (float("inf") if i in INF_AT else 1.0)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_([p], MAX_NORM)
        scaler.step(opt)
        scaler.update()
        scales.append(float(scaler.get_scale()))
        if i not in INF_AT:  # float64 reference: clip the true gradient, then an SGD step
            g = 2 * (ref - target.double())
            ref -= LR * g * min(1.0, MAX_NORM / (float(g.norm()) + 1e-6))
    want = expected_scales(init, growth, backoff)
    bad = next((i for i, (a, b) in enumerate(zip(scales, want, strict=True)) if a != b), None)
    if bad is not None:
        problems.append(
            f"GradScaler scale after update {bad} on {device} was {scales[bad]:g}, the documented "
            f"rule gives {want[bad]:g} (inf steps at {sorted(INF_AT)[:6]}..., growth x{growth:g} "
            f"every {INTERVAL} clean steps, backoff x{backoff:g})"
        )
    if not all(0 < s < float("inf") for s in scales):
        problems.append(
            f"GradScaler scale left (0, inf) on {device}: {[s for s in scales if not 0 < s < 2**128][:3]}"
        )
    step = compare(
        p.detach(),
        ref,
        op=f"params after {STEPS} scaled steps (unscale_, clip, step)",
        device=device,
        dtype="float32",
        atol=STEPS * 16 * 2**-24 * (1 + float(ref.abs().max())),
        rtol=0.0,
    )
    if not step.ok:
        problems.append(step.describe())
    return {
        "final_scale": scales[-1],
        "min_scale": min(scales),
        "max_scale": max(scales),
        "params": step.measured(),
    }, problems


def amp_dynamics(ctx: Context) -> Result:
    """Autocast's cast cache and GradScaler's long-run dynamics and unscale→clip→step hold on every device."""
    comparisons: list[Comparison] = []
    problems: list[str] = []
    measured: dict[str, Any] = {}
    with numerics_mode():
        for device in check_devices():
            comparisons += cast_cache_comparisons(device)
            measured[f"scaler@{device}"], bad = scaler_problems(device)
            problems += bad
    tolerances = {
        "cast_cache": CAST_TOL,
        "scaler": "the documented growth/backoff rule, exactly",
        "params": f"{STEPS}·16·u·(1+max|p|) (16 float32 operations per step)",
    }
    return comparisons_result(
        "autocast cast cache and GradScaler dynamics",
        comparisons,
        tolerances=tolerances,
        extra=measured,
        problems=problems,
        remediation="autocast or GradScaler misbehaves in this torch build; reinstall torch "
        "and use torch.amp.autocast / torch.amp.GradScaler",
    )
