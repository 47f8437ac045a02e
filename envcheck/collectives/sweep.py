"""`dist.busbw`: the all-reduce bandwidth sweep (nccl-tests conventions), also reusable by bench code.

`sweep` runs inside an initialised process group; every rank must call it with the same sizes.
Timing arithmetic lives in the shared `timing` module; `busbw`/`algbw` are re-exported here.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from envcheck.collectives.pattern import VERIFY_WORKSPACE_BYTES, count_wrong_exact, fill_exact
from envcheck.collectives.rank_context import RankContext
from envcheck.collectives.timing import MIB, algbw, busbw, iterations, slowest_rank, time_op
from envcheck.collectives.verdicts import WRONG_REMEDIATION, format_table, scope, sweep_rows
from envcheck.core.check import DistOptions
from envcheck.core.result import FaultClass, Result, failed, passed, warned

# Finding codes this module emits (each one is in envcheck.cluster.finding_codes.TABLE).
BUSBW_LOW = "perf.busbw_low"

__all__ = ["CPU_SIZES", "algbw", "busbw", "gpu_sizes", "judge", "run", "sweep", "sweep_memory"]

CPU_SIZES = tuple(MIB // 16 * 4**k for k in range(5))  # 64 KiB .. 16 MiB
GPU_MIN_TOP = 256 * MIB
GPU_MAX_TOP = 1024 * MIB
SWEEP_DEADLINE_S = 60.0
BUSBW_TIMEOUT_S = 75.0


# What one sweep size holds on the GPU at once: the message buffer (all-reduced in place), the
# verification's chunked temporaries, and room for NCCL's own buffers (channels x peers x
# NCCL_BUFFSIZE, plus the communicator's workspace), which grow with the number of peers.
NCCL_MARGIN_BYTES = 512 * MIB


def sweep_memory(nbytes: int) -> int:
    """Device bytes one sweep size of `nbytes` needs at its peak (message + verification + NCCL)."""
    return nbytes + VERIFY_WORKSPACE_BYTES + NCCL_MARGIN_BYTES


def gpu_sizes(free_bytes: int, memory_fraction: float, floor_bytes: int | None = None) -> tuple[int, ...]:
    """1 MiB doubling up to the largest power of two that fits, plus the floor's message size when it fits.

    The largest message is aimed at `memory_fraction` of the free memory (but at least GPU_MIN_TOP,
    at most GPU_MAX_TOP), and never so large that `sweep_memory` of it exceeds the free memory.
    A busbw floor measured at `floor_bytes` (Azure's 16 GiB) is compared only with a row of that size: it is added,
    beyond GPU_MAX_TOP too, when it is within `memory_fraction` of the free memory. Empty when not even 1 MiB fits.
    """
    aim = min(GPU_MAX_TOP, max(int(free_bytes * memory_fraction), GPU_MIN_TOP))
    sizes, size = [], MIB
    while size <= aim and sweep_memory(size) <= free_bytes:
        sizes.append(size)
        size *= 2
    if (
        sizes
        and floor_bytes is not None
        and floor_bytes not in sizes
        and floor_fits(floor_bytes, free_bytes, memory_fraction)
    ):
        sizes = sorted([*sizes, floor_bytes])
    return tuple(sizes)


def floor_fits(floor_bytes: int, free_bytes: int, memory_fraction: float) -> bool:
    """Whether a message of `floor_bytes` is within the sweep's memory budget (a share of the free memory)."""
    return (
        floor_bytes > 0
        and floor_bytes % 4 == 0
        and floor_bytes <= free_bytes * memory_fraction
        and sweep_memory(floor_bytes) <= free_bytes
    )


def sweep(sizes: tuple[int, ...], device: Any, progress: Any = None) -> list[dict[str, Any]]:
    """Time float32 all-reduce per size (max over ranks) and verify one exact run per size."""
    import torch
    import torch.distributed as dist

    rank, world = dist.get_rank(), dist.get_world_size()
    on_gpu = device.type == "cuda"
    rows = []
    for nbytes in sizes:
        if progress is not None:
            progress(f"sweep.{nbytes}")
        count = nbytes // 4
        buf = torch.zeros(count, device=device, dtype=torch.float32)
        t = slowest_rank(time_op(partial(dist.all_reduce, buf), *iterations(nbytes, on_gpu), on_gpu), device)
        fill_exact(buf, rank)
        dist.all_reduce(buf)
        wrong = count_wrong_exact(buf, world)
        del buf
        rows.append(
            {
                "bytes": nbytes,
                "dtype": "float32",
                "time_us": round(t * 1e6, 2),
                "algbw_gbps": round(algbw(nbytes, t), 4),
                "busbw_gbps": round(busbw(algbw(nbytes, t), world), 4),
                "wrong": wrong,
            }
        )
    return rows


def agreed_gpu_sizes(device: Any, memory_fraction: float, floor_bytes: int | None = None) -> tuple[int, ...]:
    """Sweep sizes from the smallest free memory of any rank, so every rank uses the same list."""
    import torch
    import torch.distributed as dist

    free = torch.tensor([torch.cuda.mem_get_info(device)[0]], device=device, dtype=torch.int64)
    dist.all_reduce(free, op=dist.ReduceOp.MIN)
    sizes = gpu_sizes(int(free.item()), memory_fraction, floor_bytes)
    if not sizes:
        raise RuntimeError(
            f"only {int(free.item()) / MIB:.0f} MiB of GPU memory free on some rank; the sweep "
            f"needs {sweep_memory(MIB) / MIB:.0f} MiB for its smallest size"
        )
    return sizes


def run(rc: RankContext) -> list[dict[str, Any]]:
    """The rank side: the plan's sizes, or (GPU, none given) sizes agreed from free memory."""
    sizes = rc.sizes
    if not sizes:
        sizes = (
            agreed_gpu_sizes(rc.device, rc.memory_fraction, rc.floor_bytes)
            if rc.device.type == "cuda"
            else CPU_SIZES
        )
    return sweep(sizes, rc.device, rc.progress)


def judge(findings: list[dict[str, Any]], backend: str, world: int, options: DistOptions) -> Result:
    """busbw against an optional floor (`min_busbw_gbps`, `strict_perf`); #wrong fails.

    A floor measured at a message size (`min_busbw_at_bytes`: Azure's 460 GB/s is a 16 GiB all-reduce) is compared
    only with the row of that size; a sweep without it says so and judges nothing (busbw grows with the message
    size, so a 1 GiB peak below a 16 GiB floor says nothing about the node). A floor without a size is compared with
    the sweep's peak."""
    min_busbw = options.min_busbw_gbps
    rows = sweep_rows(findings)
    peak = max(rows, key=lambda r: r["busbw_gbps"])
    measured = {
        "backend": backend,
        "world_size": world,
        "peak_busbw_gbps": peak["busbw_gbps"],
        "peak_at_bytes": peak["bytes"],
        "rows": rows,
    }
    expected: dict[str, Any] = {"wrong": 0}
    table = format_table(rows)
    wrong = sum(r["wrong"] for r in rows)
    head = f"all_reduce busbw peak {peak['busbw_gbps']:.3f} GB/s at {peak['bytes']} B over {scope(backend, world)}"
    if wrong:
        return failed(
            f"{head}, but #wrong {wrong} during the sweep",
            WRONG_REMEDIATION,
            measured=measured,
            expected=expected,
            details=table,
            fault_class=FaultClass.NODE,
        )
    if min_busbw is not None:
        at = options.min_busbw_at_bytes
        expected["min_busbw_gbps"] = min_busbw
        if at is not None:
            expected["min_busbw_at_bytes"] = at
        row = peak if at is None else next((r for r in rows if r["bytes"] == at), None)
        if row is None:
            measured["floor_not_comparable"] = not_comparable(min_busbw, at or 0, rows, backend)
            head += f"; {measured['floor_not_comparable']}"
        elif row["busbw_gbps"] < min_busbw:
            fix = (
                "Check `nvidia-smi topo -m` (PIX/NV# links expected, not SYS), that NCCL uses NVLink/P2P "
                "(NCCL_DEBUG=INFO), and that containers run with --ipc=host"
            )
            make = failed if options.strict_perf else warned
            where = "" if at is None else f"; at the floor's {at} B message: {row['busbw_gbps']:.3f} GB/s"
            return make(
                f"{head}{where}, below the {min_busbw:g} GB/s floor",
                fix,
                measured=measured,
                expected=expected,
                details=table,
                fault_class=FaultClass.NODE,
                code=BUSBW_LOW,
            )
    if world == 1:
        head += " (busbw is 0 by definition with one rank)"
    return passed(head, measured=measured, expected=expected, details=table)


def not_comparable(floor: float, at: int, rows: list[dict[str, Any]], backend: str) -> str:
    """Why a floor measured at `at` bytes was not judged: this sweep has no row of that size."""
    why = (
        "a CPU (gloo) sweep stops at 16 MiB"
        if backend != "nccl"
        else f"a {at} B message must fit in --memory-fraction of the free GPU memory (it needs about "
        f"{sweep_memory(at) // MIB} MiB free); raise --memory-fraction to measure it"
    )
    return (
        f"the {floor:g} GB/s floor was measured at {at} B, this sweep's largest message is "
        f"{max(r['bytes'] for r in rows)} B: not comparable, not judged ({why})"
    )
