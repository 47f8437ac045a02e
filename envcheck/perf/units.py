"""The bench units: CheckSpecs in a bench-private registry, run by the engine's Runner.

They are not in `envcheck.checks.check_registry.registry()`: the engine's worker resolves them by their
`module:function` reference, so isolation, timeouts and crash handling are exactly the core's.

Each unit returns a Result whose `measured` carries `figures` (see figures.py) and the GPU state
sampled while it ran (how a unit runs: unit_run.py; what the bench runs on, bench.device: device_probe.py). GPU units need CUDA and are skipped with the engine's reason without it;
CPU variants are what a CPU-only host runs instead.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from envcheck.core.check import CheckSpec, Context, Needs
from envcheck.core.result import Result, skipped
from envcheck.perf import compile_speedup, matmul, memory, training_claims
from envcheck.perf.allreduce_unit import all_reduce_figures
from envcheck.perf.device_probe import device_probe, pcie_gbps, peak_of, tflops_peaks
from envcheck.perf.per_device import relative_check
from envcheck.perf.unit_run import quick, run_unit


def _unit(
    name: str,
    desc: str,
    func: Callable[[Context], Result],
    *,
    gpu: bool,
    timeout_s: float = 300.0,
    group: str = "bench",
    min_gpus: int = 0,
) -> CheckSpec:
    return CheckSpec(
        name=f"bench.{name}",
        func=func,
        description=desc,
        needs=Needs(torch=True, cuda=gpu, min_gpus=min_gpus),
        timeout_s=timeout_s,
        group=group,
    )


# Unit functions are module-level so the engine's worker can resolve them by `module:function`.
def gpu_matmul(ctx: Context) -> Result:
    """Matmul TFLOP/s by dtype and size, against the datasheet peak."""
    return run_unit(ctx, lambda c: matmul.gpu_matmul_figures(quick(c), tflops_peaks()), gpu=True)


def gpu_device_memory(ctx: Context) -> Result:
    """Device-to-device copy bandwidth against the memory peak."""
    return run_unit(ctx, lambda c: memory.device_copy_figures(quick(c), peak_of("mem")), gpu=True)


def gpu_host_copies(ctx: Context) -> Result:
    """H2D/D2H, pinned and pageable, against the PCIe link."""
    return run_unit(ctx, lambda c: memory.host_copy_figures(quick(c), pcie_gbps()), gpu=True)


def gpu_all_reduce(ctx: Context) -> Result:
    """NCCL all-reduce busbw sweep over every visible GPU."""
    return run_unit(ctx, lambda c: all_reduce_figures("nccl", c), gpu=True)


def gpu_amp(ctx: Context) -> Result:
    """AMP (bf16, fp16 + GradScaler) speed-up over float32 for one training step."""
    return run_unit(ctx, lambda c: training_claims.amp_figures("cuda", quick(c)), gpu=True)


def gpu_clip(ctx: Context) -> Result:
    """clip_grad_norm_ overhead as a fraction of a training step."""
    return run_unit(ctx, lambda c: training_claims.clip_figures("cuda", quick(c)), gpu=True)


def gpu_checkpoint(ctx: Context) -> Result:
    """Gradient checkpointing: peak-memory saving and time cost."""
    return run_unit(ctx, lambda c: training_claims.checkpoint_figures("cuda", quick(c)), gpu=True)


def gpu_compile(ctx: Context) -> Result:
    """torch.compile speed-up on the training step."""
    return run_unit(ctx, lambda c: compile_speedup.compile_figures("cuda", quick(c)), gpu=True)


def cpu_matmul(ctx: Context) -> Result:
    """float32 matmul GFLOP/s on the CPU."""
    return run_unit(ctx, lambda c: matmul.cpu_matmul_figures(quick(c)), gpu=False)


def cpu_memory(ctx: Context) -> Result:
    """Host RAM copy bandwidth."""
    return run_unit(ctx, lambda c: memory.cpu_copy_figures(quick(c)), gpu=False)


def cpu_all_reduce(ctx: Context) -> Result:
    """gloo all-reduce busbw sweep over `cpu_ranks` processes."""
    return run_unit(ctx, lambda c: all_reduce_figures("gloo", c), gpu=False)


def cpu_amp(ctx: Context) -> Result:
    """CPU autocast bfloat16 vs float32 training step."""
    return run_unit(ctx, lambda c: training_claims.amp_figures("cpu", quick(c)), gpu=False)


def cpu_clip(ctx: Context) -> Result:
    """clip_grad_norm_ overhead on the CPU."""
    return run_unit(ctx, lambda c: training_claims.clip_figures("cpu", quick(c)), gpu=False)


def cpu_checkpoint(ctx: Context) -> Result:
    """Gradient checkpointing on the CPU (peak RSS growth, time)."""
    return run_unit(ctx, lambda c: training_claims.checkpoint_figures("cpu", quick(c)), gpu=False)


def cpu_compile(ctx: Context) -> Result:
    """torch.compile speed-up on the CPU (not in --quick: compiling takes tens of seconds)."""
    if quick(ctx):
        return skipped("--quick skips torch.compile on CPU (compiling the step takes tens of seconds here)")
    return run_unit(ctx, lambda c: compile_speedup.compile_figures("cpu", False), gpu=False)


PROBE = CheckSpec(
    name="bench.device",
    func=device_probe,
    description="what the bench runs on",
    needs=Needs(torch=True),
    timeout_s=60.0,
    group="bench",
)

GPU_UNITS: tuple[CheckSpec, ...] = (
    _unit("matmul", "matmul TFLOP/s by dtype and size vs peak", gpu_matmul, gpu=True),
    _unit("device_memory", "device-to-device copy bandwidth vs peak", gpu_device_memory, gpu=True),
    _unit("host_copies", "H2D/D2H copies, pinned and pageable, vs the PCIe link", gpu_host_copies, gpu=True),
    _unit("all_reduce", "NCCL all-reduce busbw sweep", gpu_all_reduce, gpu=True, min_gpus=2),
    _unit("amp", "AMP speed-up vs float32 (training step)", gpu_amp, gpu=True),
    _unit("clip", "clip_grad_norm_ overhead", gpu_clip, gpu=True),
    _unit(
        "checkpoint",
        "gradient checkpointing memory/time trade",
        gpu_checkpoint,
        gpu=True,
        group="bench-memory",
    ),
    _unit("compile", "torch.compile speed-up", gpu_compile, gpu=True, timeout_s=600.0),
    _unit(
        "relative",
        "each GPU and GPU pair against the node's best (matmul, HBM, H2D, D2H, peer)",
        relative_check,
        gpu=True,
        timeout_s=300.0,
    ),
)

CPU_UNITS: tuple[CheckSpec, ...] = (
    _unit("cpu_matmul", "CPU matmul GFLOP/s", cpu_matmul, gpu=False),
    _unit("cpu_memory", "host RAM copy bandwidth", cpu_memory, gpu=False),
    _unit("cpu_all_reduce", "gloo all-reduce busbw sweep", cpu_all_reduce, gpu=False),
    _unit("cpu_amp", "CPU AMP bfloat16 vs float32 step", cpu_amp, gpu=False),
    _unit("cpu_clip", "clip_grad_norm_ overhead on CPU", cpu_clip, gpu=False),
    _unit(
        "cpu_checkpoint",
        "gradient checkpointing on CPU (peak RSS, time)",
        cpu_checkpoint,
        gpu=False,
        group="bench-memory",
    ),
    _unit("cpu_compile", "torch.compile speed-up on CPU", cpu_compile, gpu=False, timeout_s=600.0),
)


@functools.cache
def bench_registry() -> dict[str, CheckSpec]:
    """Every bench unit by name (the probe first)."""
    return {spec.name: spec for spec in (PROBE, *GPU_UNITS, *CPU_UNITS)}
