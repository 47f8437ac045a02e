"""The torchrun entry's side channel and its verdicts, without torchrun (the real runs are in
tests/checks/dist/test_distributed_torchrun.py). The store is a real c10d HashStore; the clock is scripted."""

from __future__ import annotations

import torch.distributed as dist

from envcheck.collectives.local_gpu import local_rank_problem
from envcheck.collectives.rank_watch import GRACE_S, Monitor, SideChannel


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_local_rank_beyond_the_visible_gpus_is_named() -> None:
    """SIMULATED GPU count: NCCL with LOCAL_RANK 2 on a node where only 2 GPUs are visible."""
    assert local_rank_problem(1, 2, None) is None
    problem = local_rank_problem(2, 2, "0,1")
    assert problem is not None
    assert "LOCAL_RANK 2" in problem and "only 2 GPU(s) visible" in problem
    assert "CUDA_VISIBLE_DEVICES='0,1'" in problem and "--nproc-per-node 2" in problem
    assert "CUDA_VISIBLE_DEVICES=unset" in (local_rank_problem(0, 0, None) or "")


def _monitor(world: int, stall_s: float = 10.0) -> tuple[Monitor, SideChannel, Clock]:
    clock = Clock()
    channel = SideChannel(dist.HashStore())
    return Monitor(channel, world, stall_s, now=clock), channel, clock


def test_all_ranks_reporting_is_done() -> None:
    monitor, channel, _ = _monitor(2)
    for rank in (0, 1):
        channel.beat(rank)
        channel.phase(rank, "ready")
        channel.found(rank, {"rank": rank})
    monitor.poll()
    assert monitor.all_done() and not monitor.give_up()


def test_a_silent_rank_is_dead_and_the_rest_get_a_grace() -> None:
    monitor, channel, clock = _monitor(3)
    for rank in range(3):
        channel.beat(rank)
        channel.phase(rank, "ready")
    monitor.poll()
    for _ in range(5):  # ranks 0 and 2 keep beating; rank 1 fell silent
        clock.t += 0.5
        channel.beat(0)
        channel.beat(2)
        monitor.poll()
    assert monitor.kind(1) == "dead" and monitor.kind(0) == "running"
    assert not monitor.give_up()
    clock.t += GRACE_S
    channel.beat(0)
    channel.beat(2)
    monitor.poll()
    assert monitor.give_up()
    assert monitor.describe().startswith("rank 1 died (no heartbeat for")
    assert "ranks 0, 2 still waiting after 'ready'" in monitor.describe()


def test_no_progress_for_the_timeout_names_the_rank_behind() -> None:
    monitor, channel, clock = _monitor(2, stall_s=10.0)
    for rank in (0, 1):
        channel.beat(rank)
        channel.phase(rank, "ready")
    channel.phase(0, "all_reduce.float32")
    monitor.poll()
    clock.t += 9.0
    channel.beat(0)
    channel.beat(1)
    monitor.poll()
    assert not monitor.give_up()
    clock.t += 1.0
    channel.beat(0)
    channel.beat(1)
    monitor.poll()
    assert monitor.give_up()
    assert monitor.describe().startswith("rank 1 stalled after 'ready' (no progress for 10.0s")


def test_a_rank_that_never_started_is_not_taken_for_dead() -> None:
    """A rank still importing torch has never beaten: only the stall timeout can give up on it."""
    monitor, channel, clock = _monitor(2)
    channel.beat(0)
    monitor.poll()
    clock.t += 5.0
    channel.beat(0)
    monitor.poll()
    assert monitor.kind(1) == "running" and not monitor.give_up()


def test_verdict_and_stopped_flags_travel_through_the_store() -> None:
    monitor, channel, _ = _monitor(2)
    assert channel.verdict() is None
    channel.stopped(1)
    channel.set_verdict(1)
    monitor.poll()
    assert channel.verdict() == 1 and monitor.kind(1) == "stopped"
    assert "rank 1 stopped by torchrun (SIGTERM)" in monitor.describe()
