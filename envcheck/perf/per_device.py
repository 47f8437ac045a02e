"""Figures per GPU and per GPU pair for the relative verdict (perf.relative at --level full, bench.relative).

Each GPU: dense matmul (bfloat16 and TF32, the largest of 8192/4096/2048 that fits), HBM copy (above 4x L2, L2
flushed), pinned host-to-device and device-to-host copies; each pair i < j: a peer copy from GPU i to GPU j. All with
the bench's own units (matmul.matmul_rate, memory.copy_rate, unit_timing.measure: warm-up, CUDA events, median of
repetitions), each in the GPU's own device context (CUDA events and synchronize are per device), in interleaved rounds
(every GPU once per round, so drift hits them alike), the figure being the median over rounds. A CPU `Device` (a thread
count) runs the matmul kind on the CPU: the tests judge real CPU figures with the same verdict.
"""

from __future__ import annotations

import contextlib
import socket
import statistics
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from envcheck.core.check import Context
from envcheck.core.result import Result
from envcheck.perf import matmul, memory
from envcheck.perf.figures import figure
from envcheck.perf.relative import describe, judge
from envcheck.perf.unit_timing import Timing

MIB = 1 << 20
GPU_KINDS = ("matmul.bfloat16", "matmul.tf32", "hbm", "h2d", "d2h")
MATMUL_N = (8192, 4096, 2048)
HOST_COPY_BYTES = 256 * MIB
PEER_COPY_BYTES = 256 * MIB
ROUNDS = {"quick": 3, "full": 5}
BUDGET_S = 0.1  # per measurement (5 to 50 repetitions): a matmul of 8192 on an H100 is about 1.4 ms


@dataclass(frozen=True)
class Device:
    """One device under test: `subject` as findings and the fleet name it ('3'), its label ('GPU 3'), the torch
    device ('cuda:3', 'cpu') and, for a CPU device, torch's thread count."""

    subject: str
    label: str
    torch_device: str
    threads: int | None = None

    @property
    def cuda_index(self) -> int | None:
        """The CUDA index, or None for a CPU device."""
        return int(self.torch_device.split(":")[1]) if self.torch_device.startswith("cuda:") else None


def gpu_devices(count: int) -> list[Device]:
    """GPU 0 .. count-1 as torch numbers them."""
    return [Device(str(i), f"GPU {i}", f"cuda:{i}") for i in range(count)]


@contextlib.contextmanager
def on(device: Device) -> Iterator[None]:
    """Make `device` current (a GPU's device context, or a CPU device's thread count) while measuring on it."""
    import torch

    if device.cuda_index is not None:
        with torch.cuda.device(device.cuda_index):
            yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(device.threads or before)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@dataclass
class Setup:
    """What one device's measurements share: the matmul size per dtype, the HBM copy size, the L2 flush, notes."""

    matmul_n: dict[str, int]
    hbm_bytes: int | None
    flush: Any
    notes: list[str]


def setup(device: Device, kinds: Sequence[str]) -> Setup:
    """Sizes that fit in the device's free memory (80%), and its L2 flush."""
    import torch

    index = device.cuda_index
    if index is None:
        return Setup({k.split(".", 1)[1]: 1024 for k in kinds if k.startswith("matmul.")}, None, None, [])
    l2 = matmul.l2_bytes(device.torch_device)
    free = int(torch.cuda.mem_get_info(index)[0])
    sizes, notes = {}, []
    for kind in kinds:
        if kind.startswith("matmul."):
            dtype = kind.split(".", 1)[1]
            kept, note = matmul.fitting_sizes(MATMUL_N, dtype, l2, free)
            if kept:
                sizes[dtype] = max(kept)
            notes += [note] if note else []
    copies, copy_notes = memory.device_copy_sizes(True, l2, free)
    return Setup(
        sizes, max(copies) if copies else None, matmul.l2_flusher(device.torch_device), notes + copy_notes
    )


def measure_one(kind: str, device: Device, plan: Setup) -> tuple[float, Timing, str] | None:
    """(value, timing, unit) of one kind on one device, or None when it does not fit."""
    target = device.torch_device
    if kind.startswith("matmul."):
        dtype = kind.split(".", 1)[1]
        if dtype not in plan.matmul_n:
            return None
        rate, timing = matmul.matmul_rate(
            plan.matmul_n[dtype], dtype, target, budget_s=BUDGET_S, before=plan.flush
        )
        return (
            (rate / 1e12, timing, "TFLOP/s")
            if device.cuda_index is not None
            else (rate / 1e9, timing, "GFLOP/s")
        )
    if kind == "hbm":
        if plan.hbm_bytes is None:
            return None
        rate, timing = memory.copy_rate(plan.hbm_bytes, target, target, budget_s=BUDGET_S, before=plan.flush)
        return 2 * rate / 1e9, timing, "GB/s"  # read + write, as bench's device copy counts it
    src, dst = ("cpu", target) if kind == "h2d" else (target, "cpu")
    rate, timing = memory.copy_rate(HOST_COPY_BYTES, src, dst, pinned=True, budget_s=BUDGET_S)
    return rate / 1e9, timing, "GB/s"


def _figure(
    kind: str,
    scope: str,
    subject: str,
    label: str,
    samples: list[tuple[float, Timing, str]],
    peak: float | None,
    note: str | None,
) -> dict[str, Any]:
    values = [s[0] for s in samples]
    median = statistics.median(values)
    timing = min(samples, key=lambda s: abs(s[0] - median))[1]
    key = f"{kind}.gpu{subject}" if scope != "device" else f"{kind}.{subject}"
    fig = figure(
        key,
        median,
        samples[0][2],
        peak=peak,
        timing=timing,
        label=f"{label} {describe(kind)}",
        series=describe(kind),
        note=note,
    )
    fig.update(
        kind=kind, scope=scope, subject=subject, device_label=label, rounds=[round(v, 4) for v in values]
    )
    return fig


def device_figures(
    devices: Sequence[Device],
    kinds: Sequence[str],
    rounds: int,
    peaks: dict[str, dict[str, float]] | None = None,
) -> list[dict[str, Any]]:
    """One figure per (kind, device), the median over `rounds` interleaved rounds (`peaks`: per subject, per kind)."""
    plans = {}
    for device in devices:
        with on(device):
            plans[device.subject] = setup(device, kinds)
    samples: dict[tuple[str, str], list[tuple[float, Timing, str]]] = {}
    for _ in range(rounds):
        for device in devices:
            with on(device):
                for kind in kinds:
                    got = measure_one(kind, device, plans[device.subject])
                    if got is not None:
                        samples.setdefault((kind, device.subject), []).append(got)
    labels = {d.subject: d.label for d in devices}
    scope = "gpu" if devices and devices[0].cuda_index is not None else "device"
    return [
        _figure(
            kind,
            scope,
            subject,
            labels[subject],
            got,
            (peaks or {}).get(subject, {}).get(kind),
            "; ".join(plans[subject].notes) or None,
        )
        for (kind, subject), got in samples.items()
    ]


def peer_figures(devices: Sequence[Device], rounds: int) -> list[dict[str, Any]]:
    """A peer copy from GPU i to GPU j for every pair i < j (run on GPU i: PyTorch issues a device-to-device copy
    on the source's stream), the median over rounds; a pair without P2P access says so (the copy goes via the host)."""
    import torch

    pairs = [(a, b) for n, a in enumerate(devices) for b in devices[n + 1 :]]
    samples: dict[tuple[str, str], list[tuple[float, Timing, str]]] = {}
    for _ in range(rounds):
        for a, b in pairs:
            with on(a):
                rate, timing = memory.copy_rate(
                    PEER_COPY_BYTES, a.torch_device, b.torch_device, budget_s=BUDGET_S
                )
            samples.setdefault((a.subject, b.subject), []).append((rate / 1e9, timing, "GB/s"))
    out = []
    for (i, j), got in samples.items():
        p2p = torch.cuda.can_device_access_peer(int(i), int(j))
        out.append(
            _figure(
                "peer",
                "pair",
                f"{i}-{j}",
                f"GPU {i} -> GPU {j}",
                got,
                None,
                None if p2p else "no P2P access between these GPUs: the copy goes through host memory",
            )
        )
    return out


def gpu_peaks(count: int) -> dict[str, dict[str, float]]:
    """Datasheet peaks per GPU and kind, where the GPU is in the table (bench.peaks; never a guess)."""
    import torch

    from envcheck.perf.peaks import lookup

    out: dict[str, dict[str, float]] = {}
    for i in range(count):
        props = torch.cuda.get_device_properties(i)
        peak = lookup(str(torch.cuda.get_device_name(i)), getattr(props, "multi_processor_count", None))
        if peak is not None:
            out[str(i)] = {**{f"matmul.{k}": v for k, v in peak.tflops.items()}, "hbm": peak.mem_gbps}
    return out


def _state(summary: dict[str, Any]) -> dict[str, Any]:
    medians = {k: v.get("median") for k, v in (summary.get("metrics") or {}).items() if isinstance(v, dict)}
    return {
        "idle": summary.get("idle"),
        "why_not_idle": summary.get("why_not_idle"),
        "absent": summary.get("absent"),
        **{k: medians.get(k) for k in ("sm_clock_mhz", "temperature_c", "power_w")},
    }


def relative_check(ctx: Context) -> Result:
    """perf.relative / bench.relative: measure every GPU and pair, then judge each against the node's best."""
    import torch

    from envcheck.perf.gpu_state import NvmlSampler

    torch.cuda.empty_cache()
    devices = gpu_devices(torch.cuda.device_count())
    rounds = ROUNDS["full" if ctx.full else "quick"]
    with contextlib.ExitStack() as stack:
        samplers = {
            d.subject: stack.enter_context(
                NvmlSampler(int(d.subject), root_pid=ctx.options.bench.envcheck_pid)
            )
            for d in devices
        }
        figures = device_figures(devices, GPU_KINDS, rounds, gpu_peaks(len(devices)))
        figures += peer_figures(devices, rounds) if len(devices) > 1 else []
    states = {s: _state(sampler.summary()) for s, sampler in samplers.items()}
    excluded = {s: str(st["why_not_idle"]) for s, st in states.items() if st["idle"] is False}
    extra = {
        "host": socket.gethostname(),
        "gpu_names": [str(torch.cuda.get_device_name(int(d.subject))) for d in devices],
        "gpu_state": states,
        "rounds": rounds,
    }
    return judge(
        figures,
        margin_pct=ctx.options.perf.margin_pct,
        strict=ctx.options.dist.strict_perf,
        excluded=excluded,
        extra=extra,
    )
