"""The many-node path: every torchrun worker runs the same plan; rank 0 judges all findings.

Rendezvous, ranks and MASTER_ADDR/PORT come from torchrun. Findings, phases, heartbeats and the exit
code travel over the c10d TCPStore (torchrun's agent hosts it), never over the backend under test: a
rank that dies or stalls inside NCCL cannot take the report with it. The plan runs in a worker thread;
the main thread beats, watches every rank's progress, and rank 0 gives up on a rank that stopped
beating (dead), raised, or made no progress for `--timeout` seconds (stalled), names it, writes the
report, and publishes the exit code, so every path ends within the timeout plus a few seconds.

The side channel and the heartbeat watch (SideChannel, Monitor) are in rank_watch.py; which GPU a rank takes, in
local_gpu.py.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from envcheck.collectives.gate import enter
from envcheck.collectives.local_gpu import local_device, local_rank_problem, local_world_size
from envcheck.collectives.pair_verdict import NAME as PAIRS_NAME
from envcheck.collectives.rank_hook import load_rank_hook
from envcheck.collectives.rank_plan import run_plan
from envcheck.collectives.rank_watch import (
    BEAT_S,
    POLL_S,
    Monitor,
    SideChannel,
)
from envcheck.collectives.registry import collective
from envcheck.collectives.verdicts import combine
from envcheck.core.check import DistOptions
from envcheck.core.result import FaultClass, Result, failed

REQUIRED_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK")
TERM_WAIT_S = (
    1.5  # rank 0, stopped by torchrun (SIGTERM), waits this long to tell who was stopped from who died
)
VERDICT_MARGIN_S = 10.0  # other ranks wait this long beyond rank 0's own deadline for the exit code
ACK_WAIT_S = 5.0  # without torchrun's agent (srun), rank 0 hosts the store: it waits this long for the others to read the verdict
Report = Callable[[list[Result]], None]


@dataclass(frozen=True)
class TorchrunOptions:
    """What the entry point parsed from its command line."""

    full: bool
    allow_cpu: bool
    timeout_s: float
    min_busbw_gbps: float | None = None
    strict_perf: bool = False
    min_busbw_at_bytes: int | None = None  # the message size the floor was measured at (None: judge the peak)
    pairwise: bool = False  # dist.pairs (busbw per node pair) at any level; --level full runs it anyway


def missing_env() -> list[str]:
    """torchrun variables absent from this environment (non-empty: not started by torchrun)."""
    return [name for name in REQUIRED_ENV if name not in os.environ]


def _error(rank: int, exc: BaseException) -> dict[str, Any]:
    return {
        "rank": rank,
        "error": f"{type(exc).__name__}: {exc}".splitlines()[0][:500],
        "traceback": traceback.format_exc()[-4000:],
    }


def _judge(findings: list[dict[str, Any]], backend: str, opts: TorchrunOptions, took: float) -> list[Result]:
    world = len(findings)
    broken = [f for f in findings if "error" in f]
    if broken:
        ranks = ", ".join(str(f["rank"]) for f in broken)
        result = failed(
            f"{backend} collectives raised on rank(s) {ranks}: {broken[0]['error']}",
            "see details for each failing rank's traceback; rerun with NCCL_DEBUG=INFO",
            measured={"world_size": world},
            details="\n".join(f["traceback"] for f in broken),
            fault_class=FaultClass.NODE,
        )
        return [result.named(ALL_REDUCE.name, took)]
    options = DistOptions(
        min_busbw_gbps=opts.min_busbw_gbps,
        min_busbw_at_bytes=opts.min_busbw_at_bytes,
        strict_perf=opts.strict_perf,
    )
    return [
        combine([collective(step).judge(findings, backend, world, options) for step in check.steps]).named(
            check.name, took
        )
        for check in checks_to_run(opts)
    ]


@dataclass(frozen=True)
class NodeCheck:
    """One dist.* check of the multi-node entry: its public name, the collective steps its ranks run, and whether its
    details are a table the terminal shows after the report (the busbw sweep, the node-pair matrix)."""

    name: str
    steps: tuple[str, ...]
    table: bool = False


ALL_REDUCE = NodeCheck("dist.all_reduce", ("all_reduce",))
COLLECTIVES = NodeCheck("dist.collectives", ("all_gather", "broadcast"))
BUSBW = NodeCheck("dist.busbw", ("sweep",), table=True)
PAIRS = NodeCheck(PAIRS_NAME, ("pairs",), table=True)
TABLE_CHECKS = frozenset(c.name for c in (ALL_REDUCE, COLLECTIVES, BUSBW, PAIRS) if c.table)


def checks_to_run(opts: TorchrunOptions) -> list[NodeCheck]:
    """The checks in the order they run, as the single-node checks define them: busbw at full level, the pairs at
    full level or with --pairwise."""
    out = [ALL_REDUCE, COLLECTIVES]
    if opts.full:
        out.append(BUSBW)
    if opts.full or opts.pairwise:
        out.append(PAIRS)
    return out


def incomplete_result(monitor: Monitor, backend: str, took: float) -> Result:
    """FAIL naming the dead, raising, stopped or stalled ranks (not every rank reported)."""
    details = "\n".join(
        f"--- rank {s.found['rank']}:\n{s.found.get('traceback', '')}"
        for s in monitor.ranks
        if s.found and "error" in s.found
    )
    return failed(
        f"{backend} ranks did not all finish: {monitor.describe()}",
        "the named rank's node log shows why it died or where it hangs; rerun with NCCL_DEBUG=INFO "
        "(and NCCL_P2P_DISABLE=1, then NCCL_SHM_DISABLE=1, to isolate a transport)",
        measured={"world_size": monitor.world, "ranks": monitor.table(), "timeout_s": monitor.stall_s},
        details=details,
        fault_class=FaultClass.NODE,
    ).named(ALL_REDUCE.name, took)


def _with(report: Report, extra: list[Result]) -> Report:
    """`report` with the roll call's warnings added after the collectives' results."""
    return lambda results: report([*results, *extra])


def _wait_for_acks(channel: SideChannel, monitor: Monitor) -> None:
    """When rank 0 hosts the store (no torchrun agent: srun), keep it up until the live ranks read the verdict;
    leaving at once would make them fail reading it (connection closed) instead of exiting with it."""
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        return
    live = sum(1 for r in range(1, monitor.world) if monitor.kind(r) != "dead")
    deadline = time.monotonic() + ACK_WAIT_S
    while channel.acks() < live and time.monotonic() < deadline:
        time.sleep(POLL_S)


def run_this_rank(opts: TorchrunOptions, report: Report) -> tuple[int, bool]:
    """Run this rank; rank 0 calls `report` with the results. Returns (agreed exit code, clean).

    `clean` is False when the plan thread may still be stuck in a collective: the caller must then
    leave with os._exit (process teardown would wait for it).
    """
    import torch
    import torch.distributed as dist

    rank, world, local = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    use_nccl = torch.cuda.is_available() and not opts.allow_cpu
    backend = "nccl" if use_nccl else "gloo"
    gate = enter(
        rank, world, opts.timeout_s, report, backend
    )  # look, roll call, transport probe: named stops
    if gate.store is None:
        return gate.code, gate.clean
    if gate.warnings:
        report = _with(report, gate.warnings)
    store = gate.store
    channel = SideChannel(dist.PrefixStore("", store))
    channel.beat(rank)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    began = time.monotonic()

    def plan() -> None:
        try:
            device = torch.device("cpu")
            if use_nccl:
                visible, local_world = torch.cuda.device_count(), local_world_size(os.environ, rank)
                index = local_device(local, visible, local_world)
                if index is None:
                    raise RuntimeError(
                        local_rank_problem(
                            local, visible, os.environ.get("CUDA_VISIBLE_DEVICES"), local_world
                        )
                    )
                device = torch.device("cuda", index)
            kwargs: dict[str, Any] = {}
            if use_nccl:
                torch.cuda.set_device(device)
                kwargs["device_id"] = device
            channel.phase(rank, "init")
            dist.init_process_group(
                backend,
                store=dist.PrefixStore("pg/", store),
                rank=rank,
                world_size=world,
                timeout=timedelta(seconds=opts.timeout_s),
                **kwargs,
            )
            channel.phase(rank, "barrier")
            dist.barrier()
            channel.phase(rank, "ready")
            steps = tuple(step for check in checks_to_run(opts) for step in check.steps)
            found = run_plan(
                rank,
                world,
                device,
                steps,
                (),
                lambda phase: channel.phase(rank, phase),
                load_rank_hook(),
                floor_bytes=opts.min_busbw_at_bytes if opts.min_busbw_gbps else None,
            )
        except Exception as exc:
            found = _error(rank, exc)
        channel.found(rank, found)

    channel.phase(rank, "started")
    worker = threading.Thread(target=plan, name="envcheck-dist-plan", daemon=True)
    worker.start()
    monitor = Monitor(channel, world, opts.timeout_s)
    code: int | None = None
    beat_at = 0.0
    poll_s = max(POLL_S, world / 1000)  # rank 0 reads 3 counters per rank per poll
    while code is None:
        if time.monotonic() - beat_at >= BEAT_S:
            channel.beat(rank)
            beat_at = time.monotonic()
        monitor.poll(None if rank == 0 else range(1))  # the others only watch rank 0
        if rank == 0:
            finished = monitor.all_done()
            if stop.is_set() and not finished:
                channel.stopped(rank)
                time.sleep(TERM_WAIT_S)  # let live ranks say they were stopped, dead ones fall silent
                monitor.poll()
            if finished or stop.is_set() or monitor.give_up():
                took = time.monotonic() - began
                results = (
                    _judge([s.found or {} for s in monitor.ranks], backend, opts, took)
                    if finished
                    else [incomplete_result(monitor, backend, took)]
                )
                code = int(any(r.status.is_bad for r in results))
                try:
                    report(results)
                finally:
                    channel.set_verdict(code)  # even if reporting raised: the others must not wait
                break
        else:
            code = channel.verdict()
            if code is not None:
                break
            if stop.is_set():
                channel.stopped(rank)
                code = 1
            elif monitor.kind(0) == "dead" or monitor.stalled_for() >= opts.timeout_s + VERDICT_MARGIN_S:
                code = 1  # rank 0 is gone, or made no progress well past its own deadline: no verdict
            if code is not None:
                break
        time.sleep(poll_s)
    if rank == 0:
        _wait_for_acks(channel, monitor)
    else:
        try:
            channel.ack()
        except Exception:  # rank 0 and its store are gone: nothing left to tell it
            pass
    clean = monitor.all_done() and not stop.is_set()
    if clean:
        worker.join()
        if dist.is_initialized():  # a rank whose process group never came up has none to destroy
            dist.destroy_process_group()
    return code, clean
