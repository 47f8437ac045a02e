"""What a burn runs on: one worker per visible GPU, or (asked for, on a host without one) one per usable CPU core;
the budget's clock, and each worker's configuration."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

ROUND_S = 0.5  # a round of every workload: the budget is honoured within about one round
COLLECTIVE_TIMEOUT_S = 60.0


class NoDevice(Exception):
    """Nothing to burn here (no GPU, and CPU workers were not asked for): the user's to fix, with how."""


@dataclass(frozen=True)
class Slot:
    """One worker's place: torch's device string and, for a CPU worker, the core it is pinned to."""

    device: str
    core: int | None = None


@dataclass(frozen=True)
class Plan:
    """A burn: the slots, the budget (counted from `began`, CLOCK_MONOTONIC), the workloads asked for, threads per
    worker, and how workers start (fork: a CPU burn whose coordinator holds no CUDA state; else spawn)."""

    slots: tuple[Slot, ...]
    budget_s: float
    began: float = field(default_factory=time.monotonic)
    only: tuple[str, ...] = ()
    threads: int = 1
    round_s: float = ROUND_S
    fork: bool = False

    @property
    def deadline(self) -> float:
        """When the workers stop starting rounds (CLOCK_MONOTONIC)."""
        return self.began + self.budget_s

    @property
    def kind(self) -> str:
        """'cuda' or 'cpu'."""
        return "cpu" if self.slots and self.slots[0].device == "cpu" else "cuda"

    def config(self, index: int, store: str, out_fd: int) -> dict[str, object]:
        """Worker `index`'s configuration (envcheck.burn.loop reads it)."""
        slot = self.slots[index]
        return {
            "index": index,
            "world": len(self.slots),
            "device": slot.device,
            "core": slot.core,
            "threads": self.threads,
            "deadline": self.deadline,
            "only": list(self.only),
            "store": store,
            "out_fd": out_fd,
            "round_s": self.round_s,
            "collective_timeout_s": COLLECTIVE_TIMEOUT_S,
        }


def usable_cores() -> list[int]:
    """The CPU cores this process may run on (its affinity), in order."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def gpu_count() -> int:
    """How many GPUs torch sees here (CUDA_VISIBLE_DEVICES applied)."""
    import torch

    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


def make_plan(
    budget_s: float,
    *,
    allow_cpu: bool,
    cpu_workers: int | None,
    only: tuple[str, ...] = (),
    began: float | None = None,
) -> Plan:
    """The plan for this host: every visible GPU, else CPU workers when `allow_cpu` (`cpu_workers` of them, or one
    per usable core; more than the cores share them in turn). NoDevice when neither."""
    began = time.monotonic() if began is None else began
    gpus = gpu_count()
    if gpus:
        threads = max(1, len(usable_cores()) // gpus)
        slots = tuple(Slot(f"cuda:{i}") for i in range(gpus))
        return Plan(slots, budget_s, began, only, threads, fork=False)
    if not allow_cpu:
        raise NoDevice(
            "no CUDA device is visible (torch.cuda.device_count() is 0); on a GPU node check `nvidia-smi` and the "
            "container's --gpus, or pass --allow-cpu to burn the CPU cores instead"
        )
    cores = usable_cores()
    count = cpu_workers or len(cores)
    slots = tuple(Slot("cpu", cores[i % len(cores)]) for i in range(count))
    return Plan(slots, budget_s, began, only, 1, fork=True)
