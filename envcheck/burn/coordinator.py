"""The coordinator: start one worker per slot, fold their records into the tally as they come, sample the devices,
show progress, and end the burn on time however it ends.

The budget is counted from the command's start: the workers stop starting rounds at the deadline (each checks it,
and the coordinator tells them), and any worker still running GRACE_S later is killed, so a burn ends within about
a round plus GRACE_S of its budget. Ctrl-C or SIGTERM stops the workers the same way and the burn is judged on what
finished. A worker that fails or dies stops the others (they would wait for it in a collective): that is envcheck's
own failure, reported with the worker's own words and log, never a verdict on the device.
"""

from __future__ import annotations

import os
import selectors
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envcheck.burn.plan import Plan
from envcheck.burn.processes import WorkerProcess, prime_fork
from envcheck.burn.records import BadRecord, Tally
from envcheck.burn.sampler import Sampler, period_for
from envcheck.core.signals import Interrupted, deferred

GRACE_S = 3.0  # after the deadline (or a stop), how long workers get to finish their round
START_S = 120.0  # a worker that has not said `ready` by then did not start (torch's import, CUDA's init)
POLL_S = 0.2
BUCKETS = 120  # throughput-over-time points per burn (one bucket is at least a second)
WORKER_ENV = {"OMP_NUM_THREADS": "1", "CUBLAS_WORKSPACE_CONFIG": ":4096:8", "PYTHONUNBUFFERED": "1"}

Progress = Callable[[Tally, float], None]  # (the tally so far, seconds since the start)


@dataclass
class BurnRun:
    """A finished burn: the tally, the samples, how it ended, and envcheck's own failures on the way."""

    plan: Plan
    tally: Tally
    samples: list[dict[str, Any]]
    elapsed_s: float
    stopped_by: str  # 'budget', 'interrupt' (Ctrl-C, SIGTERM), 'worker' (one failed), 'start' (none started)
    problems: list[str] = field(default_factory=list)
    exit_codes: dict[int, int | None] = field(default_factory=dict)
    gpu_samples_absent: str | None = None
    signal: BaseException | None = None  # the KeyboardInterrupt or Interrupted that stopped it


def worker_env() -> dict[str, str]:
    """The workers' environment: ours, with deterministic cuBLAS and one OpenMP thread unless already set."""
    env = dict(os.environ)
    for key, value in WORKER_ENV.items():
        env.setdefault(key, value)
    return env


class Coordinator:
    """Runs one plan to its end (`run`)."""

    def __init__(self, plan: Plan, progress: Progress | None = None) -> None:
        self.plan = plan
        self.progress = progress
        self.tally = Tally(plan.began, max(1.0, plan.budget_s / BUCKETS))
        self.sampler = Sampler(plan.began, period_for(plan.budget_s))
        self.workers: list[WorkerProcess] = []
        self.problems: list[str] = []
        self.buffers: dict[int, bytes] = {}
        self.watched: set[int] = set()
        self.stopped_by = "budget"

    def run(self) -> BurnRun:
        """Start the workers, burn until the budget ends (or Ctrl-C, or a worker fails), and return what ran."""
        folder = Path(tempfile.mkdtemp(prefix="envcheck-burn-"))
        caught: BaseException | None = None
        try:
            self._start(folder)
            self.sampler.start()
            self._watch()
        except (KeyboardInterrupt, Interrupted) as exc:
            caught, self.stopped_by = exc, "interrupt"
            with deferred(redeliver=False):  # a second Ctrl-C does not cut the clean-up short
                self._finish(time.monotonic() + GRACE_S)
        finally:
            with deferred(redeliver=False):
                self._finish(time.monotonic())
                self.sampler.stop()
                shutil.rmtree(folder, ignore_errors=True)
        return BurnRun(
            self.plan,
            self.tally,
            list(self.sampler.rows),
            round(time.monotonic() - self.plan.began, 3),
            self.stopped_by,
            self.problems,
            {w.index: w.returncode for w in self.workers},
            self.sampler.gpu_absent,
            caught,
        )

    def _start(self, folder: Path) -> None:
        env, store = worker_env(), str(folder / "store")
        if self.plan.fork:
            prime_fork()
        for index in range(len(self.plan.slots)):
            others = tuple(fd for w in self.workers for fd in w.ends)
            config = self.plan.config(index, store, -1)
            self.workers.append(WorkerProcess(index, config, folder, self.plan.fork, env, others))

    def _read(self, worker: WorkerProcess) -> None:
        while worker.records >= 0:
            try:
                chunk = os.read(worker.records, 1 << 16)
            except BlockingIOError:
                return
            except OSError:
                return
            if not chunk:
                return
            data = self.buffers.get(worker.index, b"") + chunk
            *lines, rest = data.split(b"\n")
            self.buffers[worker.index] = rest
            for line in lines:
                if not line.strip():
                    continue
                try:
                    self.tally.take(worker.index, line.decode(errors="replace"))
                except BadRecord as exc:
                    self._fail("worker", str(exc))
                    return
                hello = self.tally.workers[worker.index].hello
                if hello and worker.index not in self.watched:
                    self.watched.add(worker.index)
                    self.sampler.watch(worker.index, hello)

    def _fail(self, why: str, problem: str) -> None:
        if problem not in self.problems:
            self.problems.append(problem)
        if self.stopped_by == "budget":
            self.stopped_by = why
        for w in self.workers:
            w.stop()

    def _watch(self) -> None:
        selector = selectors.DefaultSelector()
        for w in self.workers:
            selector.register(w.records, selectors.EVENT_READ, w)
        stopping_at: float | None = None
        last_progress = 0.0
        while True:
            for key, _ in selector.select(POLL_S):
                self._read(key.data)
            now = time.monotonic()
            if stopping_at is None and (now >= self.plan.deadline or self.stopped_by != "budget"):
                for w in self.workers:
                    w.stop()
                stopping_at = now
            for w in self.workers:
                code = w.poll()
                tally = self.tally.worker(w.index)
                if code is not None and (code != 0 or not tally.done) and not tally.error:
                    self._read(w)
                if code is not None and not tally.done and self.stopped_by == "budget":
                    self._fail("worker", self._death(w, code))
            if not self._started(now):
                self._fail(
                    "start", f"no worker was ready within {START_S:g} s (torch's import, CUDA's start)"
                )
            if all(w.poll() is not None for w in self.workers):
                break
            if stopping_at is not None and now >= stopping_at + GRACE_S:
                break
            if self.progress is not None and now - last_progress >= 0.5:
                last_progress = now
                self.progress(self.tally, now - self.plan.began)
        selector.close()
        self._not_ready()

    def _not_ready(self) -> None:
        """Name every worker the budget ended before it was ready (joining the process group or preparing its
        workloads took longer): envcheck could not burn it, which says nothing of its device yet."""
        if self.stopped_by != "budget":
            return
        for w in self.workers:
            tally = self.tally.worker(w.index)
            if not tally.workloads and not tally.error:
                step = "joining the others or preparing its workloads" if tally.hello else "starting"
                last = (w.log_tail().strip().splitlines() or ["no output"])[-1]
                self.problems.append(
                    f"worker {w.index} ({self.plan.slots[w.index].device}) was still {step} when the budget ended "
                    f"after {self.plan.budget_s:g} s (a longer --budget, or its log: {last})"
                )

    def _started(self, now: float) -> bool:
        if now - self.plan.began < START_S:
            return True
        return all(self.tally.worker(w.index).workloads or w.poll() is not None for w in self.workers)

    def _death(self, w: WorkerProcess, code: int) -> str:
        tally = self.tally.worker(w.index)
        said = tally.error or (w.log_tail().strip().splitlines() or ["no output"])[-1]
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        return (
            f"worker {w.index} ({self.plan.slots[w.index].device}) {how} after {tally.rounds} rounds: {said}"
        )

    def _finish(self, until: float) -> None:
        """Stop every worker, read what they still send until they end or `until`, then kill what is left."""
        for w in self.workers:
            w.stop()
        while time.monotonic() < until and any(w.poll() is None for w in self.workers):
            for w in self.workers:
                self._read(w)
            time.sleep(0.05)
        for w in self.workers:
            self._read(w)
            w.kill()
            self._read(w)
            w.close()
