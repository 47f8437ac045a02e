"""The bench units: CheckSpecs in a bench-private registry, run by the engine's Runner.

They are not in `envcheck.checks.registry()`: the engine's worker resolves them by their
`module:function` reference, so isolation, timeouts and crash handling are exactly the core's.

Each unit returns a Result whose `measured` carries `figures` (see figures.py) and the GPU state
sampled while it ran. GPU units need CUDA and are skipped with the engine's reason without it;
CPU variants are what a CPU-only host runs instead.
"""

from __future__ import annotations

import functools
import os
import socket
from collections.abc import Callable
from typing import Any

from envcheck.core.check import CheckSpec, Context, Needs
from envcheck.core.result import FaultClass, Result, passed, skipped, warned
from envcheck.perf import compile_speedup, matmul, memory, training_claims
from envcheck.perf.allreduce_unit import all_reduce_figures
from envcheck.perf.gpu_state import NvmlSampler, nvml_handle
from envcheck.perf.peaks import GpuPeak, lookup, pcie_peak_gbps
from envcheck.perf.per_device import relative_check

Figures = Callable[[Context], list[dict[str, Any]]]


def _quick(ctx: Context) -> bool:
    return not ctx.full


def _threads(ctx: Context) -> None:
    threads = ctx.options.bench.cpu_threads
    if threads:
        import torch

        torch.set_num_threads(int(threads))


def _gpu_peaks() -> GpuPeak | None:
    """The peaks of GPU 0 (a MIG slice's scaled to its SMs and memory slices, or None)."""
    import torch

    sms = getattr(torch.cuda.get_device_properties(0), "multi_processor_count", None)
    return lookup(str(torch.cuda.get_device_name(0)), int(sms) if sms else None)


def device_probe(ctx: Context) -> Result:
    """What the bench runs on: device, peak-table entry, PCIe link, idle state, CPU load."""
    import torch

    _threads(ctx)
    info: dict[str, Any] = {
        "host": socket.gethostname(),
        "torch": torch.__version__,
        "cuda": torch.cuda.is_available(),
        "threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "loadavg": list(os.getloadavg()),
    }
    if not info["cuda"]:
        return passed(f"CPU only ({info['threads']} threads, load {info['loadavg'][0]:.1f})", measured=info)
    name = torch.cuda.get_device_name(0)
    peak = _gpu_peaks()
    info.update(
        name=name,
        cuda_version=torch.version.cuda,
        gpus=torch.cuda.device_count(),
        peak=None
        if peak is None
        else {"model": peak.model, "tflops": peak.tflops, "mem_gbps": peak.mem_gbps, "source": peak.source},
    )
    sampler = NvmlSampler(root_pid=_root_pid(ctx))
    with sampler:
        pass
    info["gpu_state"] = sampler.summary()
    unknown = (
        "peak unknown (a MIG slice we cannot scale)"
        if " mig" in name.lower()
        else "peak unknown (not in the table)"
    )
    summary = f"{name}: " + (f"peak table entry {peak.model}" if peak else unknown)
    return passed(summary, measured=info)


def _run(ctx: Context, figures: Figures, gpu: bool) -> Result:
    """Run one unit's figure function, sampling GPU state, and summarise."""
    _threads(ctx)
    if gpu:
        with NvmlSampler(root_pid=_root_pid(ctx)) as sampler:
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


def _root_pid(ctx: Context) -> int | None:
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


def _pcie_gbps() -> float | None:
    from envcheck.probe.nvml import read_nvml
    from envcheck.probe.nvml_fields import Fields

    got = read_nvml(
        lambda pynvml, progress: memory.pcie_link(Fields(pynvml), nvml_handle(0)), lambda exc: None
    )
    link = (
        got.value
    )  # None: NVML is absent, failed or hung (then the evidence is in got.hang; no peak is claimed)
    return pcie_peak_gbps(link["max_gen"], link["max_width"]) if link is not None else None


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


def _peak_of(dtype_or_mem: str) -> float | None:
    peak = _gpu_peaks()
    if peak is None:
        return None
    value: float | None = peak.mem_gbps if dtype_or_mem == "mem" else peak.tflops.get(dtype_or_mem)
    return value


def _tflops_peaks() -> dict[str, float] | None:
    peak = _gpu_peaks()
    return None if peak is None else dict(peak.tflops)


# Unit functions are module-level so the engine's worker can resolve them by `module:function`.
def gpu_matmul(ctx: Context) -> Result:
    """Matmul TFLOP/s by dtype and size, against the datasheet peak."""
    return _run(ctx, lambda c: matmul.gpu_matmul_figures(_quick(c), _tflops_peaks()), gpu=True)


def gpu_device_memory(ctx: Context) -> Result:
    """Device-to-device copy bandwidth against the memory peak."""
    return _run(ctx, lambda c: memory.device_copy_figures(_quick(c), _peak_of("mem")), gpu=True)


def gpu_host_copies(ctx: Context) -> Result:
    """H2D/D2H, pinned and pageable, against the PCIe link."""
    return _run(ctx, lambda c: memory.host_copy_figures(_quick(c), _pcie_gbps()), gpu=True)


def gpu_all_reduce(ctx: Context) -> Result:
    """NCCL all-reduce busbw sweep over every visible GPU."""
    return _run(ctx, lambda c: all_reduce_figures("nccl", c), gpu=True)


def gpu_amp(ctx: Context) -> Result:
    """AMP (bf16, fp16 + GradScaler) speed-up over float32 for one training step."""
    return _run(ctx, lambda c: training_claims.amp_figures("cuda", _quick(c)), gpu=True)


def gpu_clip(ctx: Context) -> Result:
    """clip_grad_norm_ overhead as a fraction of a training step."""
    return _run(ctx, lambda c: training_claims.clip_figures("cuda", _quick(c)), gpu=True)


def gpu_checkpoint(ctx: Context) -> Result:
    """Gradient checkpointing: peak-memory saving and time cost."""
    return _run(ctx, lambda c: training_claims.checkpoint_figures("cuda", _quick(c)), gpu=True)


def gpu_compile(ctx: Context) -> Result:
    """torch.compile speed-up on the training step."""
    return _run(ctx, lambda c: compile_speedup.compile_figures("cuda", _quick(c)), gpu=True)


def cpu_matmul(ctx: Context) -> Result:
    """float32 matmul GFLOP/s on the CPU."""
    return _run(ctx, lambda c: matmul.cpu_matmul_figures(_quick(c)), gpu=False)


def cpu_memory(ctx: Context) -> Result:
    """Host RAM copy bandwidth."""
    return _run(ctx, lambda c: memory.cpu_copy_figures(_quick(c)), gpu=False)


def cpu_all_reduce(ctx: Context) -> Result:
    """gloo all-reduce busbw sweep over `cpu_ranks` processes."""
    return _run(ctx, lambda c: all_reduce_figures("gloo", c), gpu=False)


def cpu_amp(ctx: Context) -> Result:
    """CPU autocast bfloat16 vs float32 training step."""
    return _run(ctx, lambda c: training_claims.amp_figures("cpu", _quick(c)), gpu=False)


def cpu_clip(ctx: Context) -> Result:
    """clip_grad_norm_ overhead on the CPU."""
    return _run(ctx, lambda c: training_claims.clip_figures("cpu", _quick(c)), gpu=False)


def cpu_checkpoint(ctx: Context) -> Result:
    """Gradient checkpointing on the CPU (peak RSS growth, time)."""
    return _run(ctx, lambda c: training_claims.checkpoint_figures("cpu", _quick(c)), gpu=False)


def cpu_compile(ctx: Context) -> Result:
    """torch.compile speed-up on the CPU (not in --quick: compiling takes tens of seconds)."""
    if _quick(ctx):
        return skipped("--quick skips torch.compile on CPU (compiling the step takes tens of seconds here)")
    return _run(ctx, lambda c: compile_speedup.compile_figures("cpu", False), gpu=False)


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
