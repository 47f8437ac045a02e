"""How a bench unit runs: torch's CPU threads as asked, its figures measured while the GPU's state is sampled, the
headline figure of its one-line summary, and the verdict on a GPU that was not idle."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from envcheck.core.check import Context
from envcheck.core.result import FaultClass, Result, passed, skipped, warned
from envcheck.perf.gpu_state import NvmlSampler

Figures = Callable[[Context], list[dict[str, Any]]]


def quick(ctx: Context) -> bool:
    return not ctx.full


def set_threads(ctx: Context) -> None:
    threads = ctx.options.bench.cpu_threads
    if threads:
        import torch

        torch.set_num_threads(int(threads))


def run_unit(ctx: Context, figures: Figures, gpu: bool) -> Result:
    """Run one unit's figure function, sampling GPU state, and summarise."""
    set_threads(ctx)
    if gpu:
        with NvmlSampler(root_pid=root_pid(ctx)) as sampler:
            figs = figures(ctx)
        state = sampler.summary()
    else:
        figs, state = figures(ctx), {"absent": "CPU variant: no GPU state"}
    if not figs:
        return skipped("no figures measured")
    head = headline(figs)
    pct = f" ({head['pct_of_peak']}% of peak)" if head.get("pct_of_peak") is not None else ""
    summary = f"{head['label']}: {head['value']:g} {head['unit']}{pct}"
    measured = {"figures": figs, "gpu_state": state}
    return judged(summary, measured, state if gpu else {})


def judged(summary: str, measured: dict[str, Any], state: dict[str, Any]) -> Result:
    """WARN when the GPU was certainly busy with other work; say so when that could not be told."""
    if state.get("idle") is False:
        return warned(
            summary + f"; GPU not idle: {state.get('why_not_idle')}",
            fault_class=FaultClass.NODE,
            remediation="stop other GPU processes and re-run envcheck bench",
            measured=measured,
        )
    if state.get("idle") is None and state.get("idle_unknown"):
        return passed(summary + f"; GPU idle unknown: {state['idle_unknown']}", measured=measured)
    return passed(summary, measured=measured)


def root_pid(ctx: Context) -> int | None:
    """The envcheck process that started the bench workers (its descendants are envcheck's own)."""
    return ctx.options.bench.envcheck_pid


def headline(figs: list[dict[str, Any]]) -> dict[str, Any]:
    """The figure a unit's one-line summary shows: a claim, else a speed-up, else a median over sizes
    (device memory), else the best rate."""
    claims = [f for f in figs if f.get("claim")] or [f for f in figs if str(f["key"]).endswith("speedup")]
    if claims:
        return claims[0]
    summary = [f for f in figs if str(f["key"]).endswith(".median")]
    if summary:
        return summary[0]
    rates = [f for f in figs if f["better"] == "higher"] or figs
    return max(rates, key=lambda f: f["value"])
