"""The `torch.compile` speed-up on the same training step, with the compile time reported apart."""

from __future__ import annotations

import time
from typing import Any

from envcheck.perf.figures import figure
from envcheck.perf.training_step import build, make_step
from envcheck.perf.unit_timing import interleaved


def compile_figures(device: str, quick: bool) -> list[dict[str, Any]]:
    """Eager vs compiled step time (after the first, compiling, call) and the compile time."""
    import torch

    cuda = device.startswith("cuda")
    work = build(device, quick)
    compiled = torch.compile(work.model)
    eager_step, compiled_step = make_step(work), make_step(work, model=compiled)
    start = time.perf_counter()
    compiled_step()
    if cuda:
        torch.cuda.synchronize()
    compile_s = time.perf_counter() - start
    times = interleaved(
        {"eager": eager_step, "compiled": compiled_step},
        cuda=cuda,
        rounds=3 if quick else 5,
        budget_s=0.3 if quick else 1.0,
        min_reps=3,
        warmup=1,
    )
    speedup = times["eager"].median_s / times["compiled"].median_s
    return [
        figure(
            "compile.eager.step_ms",
            times["eager"].median_s * 1e3,
            "ms",
            better="lower",
            timing=times["eager"],
            label="train step eager",
        ),
        figure(
            "compile.compiled.step_ms",
            times["compiled"].median_s * 1e3,
            "ms",
            better="lower",
            timing=times["compiled"],
            label="train step torch.compile",
        ),
        figure("compile.speedup", speedup, "x", label="torch.compile speed-up vs eager"),
        figure(
            "compile.compile_s", compile_s, "s", better="lower", label="first compiled step (compile time)"
        ),
    ]
