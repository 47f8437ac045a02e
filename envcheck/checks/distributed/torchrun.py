"""The many-node path: every torchrun worker runs the same plan; rank 0 judges all findings.

Rendezvous, ranks and MASTER_ADDR/PORT come from torchrun. Every collective (including the final
gather of findings and the exit-code broadcast) is bounded by the process-group timeout.
"""

from __future__ import annotations

import os
import time
import traceback
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from envcheck.checks.distributed import verdicts
from envcheck.checks.distributed.faults import fault_from_env
from envcheck.checks.distributed.rank_plan import run_plan
from envcheck.core.result import Result, failed

REQUIRED_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK")


@dataclass(frozen=True)
class TorchrunOptions:
    """What the entry point parsed from its command line."""

    full: bool
    allow_cpu: bool
    timeout_s: float
    min_busbw_gbps: float | None = None
    strict_perf: bool = False


def missing_env() -> list[str]:
    """torchrun variables absent from this environment (non-empty: not started by torchrun)."""
    return [name for name in REQUIRED_ENV if name not in os.environ]


def _judge(findings: list[dict[str, Any]], backend: str, opts: TorchrunOptions, took: float) -> list[Result]:
    world = len(findings)
    broken = [f for f in findings if "error" in f]
    if broken:
        ranks = ", ".join(str(f["rank"]) for f in broken)
        result = failed(f"{backend} collectives raised on rank(s) {ranks}: {broken[0]['error']}",
                        "see details for each failing rank's traceback; rerun with NCCL_DEBUG=INFO",
                        measured={"world_size": world}, details="\n".join(f["traceback"] for f in broken))
        return [result.named("dist.all_reduce", took)]
    results = [verdicts.all_reduce_result(findings, backend, world).named("dist.all_reduce", took),
               verdicts.collectives_result(findings, backend, world).named("dist.collectives", took)]
    if opts.full:
        results.append(verdicts.busbw_result(findings, backend, world, opts.min_busbw_gbps, opts.strict_perf)
                       .named("dist.busbw", took))
    return results


def run_this_rank(opts: TorchrunOptions) -> tuple[int, list[Result] | None]:
    """Join torchrun's group, run the plan, gather to rank 0. Returns (agreed exit code, rank-0 results)."""
    import torch
    import torch.distributed as dist

    rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    use_nccl = torch.cuda.is_available() and not opts.allow_cpu
    backend, device = ("nccl", torch.device("cuda", local)) if use_nccl else ("gloo", torch.device("cpu"))
    kwargs: dict[str, Any] = {}
    if use_nccl:
        torch.cuda.set_device(device)
        kwargs["device_id"] = device
    dist.init_process_group(backend, timeout=timedelta(seconds=opts.timeout_s), **kwargs)
    try:
        began = time.monotonic()
        steps = ("correctness", "sweep") if opts.full else ("correctness",)
        try:
            found = run_plan(rank, dist.get_world_size(), device, steps, (), lambda phase: None,
                             fault_from_env())
        except Exception as exc:
            found = {"rank": rank, "error": f"{type(exc).__name__}: {exc}".splitlines()[0][:500],
                     "traceback": traceback.format_exc()[-4000:]}
        gathered: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(gathered, found)
        results = _judge(gathered, backend, opts, time.monotonic() - began) if rank == 0 else None
        code = [int(any(r.status.is_bad for r in results)) if results is not None else 0]
        dist.broadcast_object_list(code, src=0)
        return int(code[0]), results
    finally:
        dist.destroy_process_group()
