"""Published training figures, measured: AMP speed-up, clip_grad_norm_ overhead, checkpointing trade.

Each function returns figures; variants are timed in alternating rounds so drift hits them alike.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from envcheck.perf.figures import claim, direction_claim, figure
from envcheck.perf.matmul import tf32_override
from envcheck.perf.peak_memory import peak_bytes_during
from envcheck.perf.training_step import CHECKPOINT_CPU_SHAPES, Workload, build, describe, make_step
from envcheck.perf.unit_timing import interleaved, measure

# (where the figure was published, the figure): the sources as a reader can look them up.
AMP_CLAIM = ("mixed-precision training guides", "AMP gives 1.5-3x training speed over float32")
CLIP_CLAIM = (
    "a ResNet-50 ImageNet benchmark, batch 256, A100",
    "clip_grad_norm_ costs under 0.3% of a training step",
)
CKPT_CLAIM = ("gradient checkpointing guides", "gradient checkpointing cuts activation memory at a time cost")


def _timing_kw(quick: bool) -> dict[str, Any]:
    return {
        "rounds": 3 if quick else 5,
        "budget_s": 0.3 if quick else 1.0,
        "min_reps": 3,
        "max_reps": 20,
        "warmup": 1,
    }


def amp_baseline_tf32_cause(
    device: str, env: Mapping[str, str] | None = None, mode: Callable[[str, bool], str] | None = None
) -> str | None:
    """Why the float32 baseline of the AMP step really ran its matmuls as TF32 (measured; CUDA only), or None."""
    if not device.startswith("cuda"):
        return None
    swap, cause = tf32_override(device, env, mode)
    return cause if swap == "float32_is_tf32" else None


def amp_figures(device: str, quick: bool) -> list[dict[str, Any]]:
    """Step time float32 vs autocast (bfloat16; plus float16 + GradScaler on GPU) -> speed-up."""
    import torch

    cuda = device.startswith("cuda")
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = False  # the baseline is true float32
    work = build(device, quick)
    variants = {"float32": make_step(work), "bfloat16": make_step(work, autocast_dtype=torch.bfloat16)}
    if cuda:
        scaler = torch.amp.GradScaler("cuda")
        variants["float16"] = make_step(work, autocast_dtype=torch.float16, scaler=scaler)
    times = interleaved(variants, cuda=cuda, **_timing_kw(quick))
    base = times["float32"].median_s
    shape = f"shape {describe(work)}"
    tf32_cause = amp_baseline_tf32_cause(device)
    as_tf32 = tf32_cause is not None
    figures = [
        figure(
            "amp.float32_as_tf32.step_ms" if as_tf32 else "amp.float32.step_ms",
            base * 1e3,
            "ms",
            better="lower",
            timing=times["float32"],
            note=shape,
            label=f"train step float32 (ran as TF32: {tf32_cause})" if as_tf32 else "train step float32",
        )
    ]
    for name in variants:
        if name == "float32":
            continue
        speedup = base / times[name].median_s
        figures.append(
            figure(
                f"amp.{name}.step_ms",
                times[name].median_s * 1e3,
                "ms",
                better="lower",
                timing=times[name],
                label=f"train step autocast {name}",
            )
        )
        figures.append(
            figure(
                f"amp.{name}.speedup_vs_tf32" if as_tf32 else f"amp.{name}.speedup",
                speedup,
                "x",
                label=f"AMP {name} speed-up vs " + ("TF32 (float32 overridden)" if as_tf32 else "float32"),
                claim=claim(
                    *AMP_CLAIM,
                    1.5,
                    3.0,
                    speedup,
                    better="higher",
                    not_comparable=(
                        f"not comparable: the float32 baseline ran as TF32 ({tf32_cause})"
                        if as_tf32
                        else None
                    ),
                ),
            )
        )
    return figures


def _device_name(device: str) -> str:
    if not device.startswith("cuda"):
        return "the CPU"
    import torch

    return str(torch.cuda.get_device_name(device))


def clip_not_comparable(work: Workload, step_s: float) -> str:
    """Why the clip share measured here cannot confirm or refute the seed's claim.

    The claim is a share of a ResNet-50 training step on an A100. clip_grad_norm_'s cost grows with
    the parameter count, a step's with its compute, so the share depends on the workload and the GPU:
    this bench's small transformer step (shorter still in --quick) makes clipping a larger share.
    The share measured here is reported, but it is not a verdict on the claim.
    """
    info = describe(work)
    return (
        f"not comparable: the claim is for a ResNet-50 step on an A100; this step is a "
        f"{info['layers']}-layer transformer ({info['parameters'] / 1e6:.1f}M parameters, batch "
        f"{info['batch']}x{info['seq']} tokens) taking {step_s * 1e3:.3g} ms on {_device_name(work.device)}"
    )


def clip_figures(device: str, quick: bool, clip_fn: Any = None) -> list[dict[str, Any]]:
    """clip_grad_norm_ cost: whole-step difference, and the clip call timed alone, as % of a step.

    `clip_fn` defaults to `torch.nn.utils.clip_grad_norm_` (tests inject a slow one).
    """
    import torch

    clip_fn = clip_fn or torch.nn.utils.clip_grad_norm_
    cuda = device.startswith("cuda")
    work = build(device, quick)
    times = interleaved(
        {"plain": make_step(work), "clipped": make_step(work, clip=1.0, clip_fn=clip_fn)},
        cuda=cuda,
        **_timing_kw(quick),
    )
    base = times["plain"].median_s
    diff_pct = 100.0 * (times["clipped"].median_s - base) / base
    params = list(work.model.parameters())
    make_step(work)()  # leaves gradients in place for the clip-alone timing
    alone = measure(lambda: clip_fn(params, 1.0), cuda=cuda, budget_s=0.3, max_reps=200)
    alone_pct = 100.0 * alone.median_s / base
    return [
        figure(
            "clip.step_ms",
            base * 1e3,
            "ms",
            better="lower",
            timing=times["plain"],
            label="train step, no clip",
        ),
        figure(
            "clip.alone_ms",
            alone.median_s * 1e3,
            "ms",
            better="lower",
            timing=alone,
            label="clip_grad_norm_ alone",
        ),
        figure(
            "clip.overhead_pct",
            alone_pct,
            "%",
            better="lower",
            label="clip cost, % of step (timed alone)",
            claim=claim(
                *CLIP_CLAIM,
                None,
                0.3,
                alone_pct,
                better="lower",
                not_comparable=clip_not_comparable(work, base),
            ),
        ),
        figure(
            "clip.step_diff_pct",
            diff_pct,
            "%",
            better="none",
            label="clipped vs plain step, % (noisy)",
            note="difference of two step medians; within the timing spread on a busy host",
        ),
    ]


def checkpoint_figures(device: str, quick: bool) -> list[dict[str, Any]]:
    """Peak memory of one step and step time, with and without per-block activation checkpointing."""
    cuda = device.startswith("cuda")
    shape = None if cuda else CHECKPOINT_CPU_SHAPES["quick" if quick else "full"]
    plain, ckpt = build(device, quick, shape=shape), build(device, quick, checkpoint=True, shape=shape)
    steps = {"plain": make_step(plain), "checkpointed": make_step(ckpt)}
    # Memory first: on a CPU the timing loops leave glibc's heap in a state that hides the peak.
    mem = {name: peak_bytes_during(step, device) for name, step in steps.items()}
    times = interleaved(steps, cuda=cuda, **{**_timing_kw(quick), "rounds": 2 if quick else 5})
    time_cost = 100.0 * (times["checkpointed"].median_s / times["plain"].median_s - 1.0)
    saving = 100.0 * (1.0 - mem["checkpointed"] / mem["plain"]) if mem["plain"] else 0.0
    trade = direction_claim(*CKPT_CLAIM, saving > 0 and time_cost > 0)
    how = "torch.cuda.max_memory_allocated" if cuda else "peak RSS growth (VmHWM, mmap-only malloc)"
    return [
        figure(
            "checkpoint.plain.peak_mib",
            mem["plain"] / 2**20,
            "MiB",
            better="lower",
            label="step peak memory",
            note=how,
        ),
        figure(
            "checkpoint.ckpt.peak_mib",
            mem["checkpointed"] / 2**20,
            "MiB",
            better="lower",
            label="step peak memory, checkpointed",
            note=how,
        ),
        figure("checkpoint.memory_saving_pct", saving, "%", label="checkpointing memory saving", claim=trade),
        figure(
            "checkpoint.time_cost_pct",
            time_cost,
            "%",
            better="lower",
            label="checkpointing time cost",
            timing=times["checkpointed"],
        ),
    ]
