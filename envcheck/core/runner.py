"""The run loop: run each selected check inline or in its group's worker, bounded by deadlines (which checks:
`envcheck.core.selection`; how a signal stops a run: `envcheck.core.signals`)."""

from __future__ import annotations

import dataclasses
import os
import re
import threading
import time
from collections.abc import Iterable
from typing import Any

from envcheck.core import signals
from envcheck.core.check import CheckSpec, Context, Hooks, reference
from envcheck.core.execute import execute
from envcheck.core.hardening import runtime_cause
from envcheck.core.isolation import early
from envcheck.core.isolation.failure import FailureKind, WorkerFailure, failure_result
from envcheck.core.isolation.protocol import Op
from envcheck.core.isolation.server_handle import START_TIMEOUT_S, ServerHandle
from envcheck.core.isolation.worker_handle import WorkerHandle
from envcheck.core.lanes import plan
from envcheck.core.result import Result, errored
from envcheck.core.run_facts import FactsCollector

PRELOAD_TIMEOUT_S = 120.0  # importing torchvision & co. once; a hang here ends the fork server


def gpu_present(dev: str = "/dev") -> bool:
    """Whether this host can have a usable GPU (an /dev/nvidiaN node), without importing torch or CUDA."""
    try:
        return any(re.fullmatch(r"nvidia\d+", n) for n in os.listdir(dev))
    except OSError:
        return False


class Runner:
    """Runs checks with one forked worker per isolation group, and a cap on the whole run."""

    def __init__(
        self,
        ctx: Context,
        total_timeout_s: float | None = None,
        *,
        env: dict[str, str] | None = None,
        share_gpu: bool | None = None,
        start_timeout_s: float = START_TIMEOUT_S,
        hooks: Hooks | None = None,
    ) -> None:
        """`env`: the workers' environment (default: ours). `share_gpu`: whether groups that use the GPU
        may overlap; default only on a host with no GPU (no /dev/nvidiaN), where there is nothing to share.
        `start_timeout_s`: how long the worker interpreter may take to start (before it imports torch).
        `hooks`: the check layer's policies (`envcheck.checks.hooks.HOOKS`); without them there are no facts."""
        self.ctx = ctx
        self.hooks = hooks or Hooks()
        self._deadline = None if total_timeout_s is None else time.monotonic() + total_timeout_s
        self._total = total_timeout_s
        self._share_gpu = (not gpu_present()) if share_gpu is None else share_gpu
        # the server the entry point started before the command line was read (envcheck.core.isolation.early), when
        # this Runner would start the same one: the process's environment and the default start-up timeout
        adopted = early.adopt() if env is None and start_timeout_s == START_TIMEOUT_S else None
        self._server = adopted or ServerHandle(env, start_timeout_s, run_deadline=self._deadline)
        self._server.run_deadline = self._deadline
        self._workers: dict[str, WorkerHandle] = {}
        self._lock = threading.Lock()
        self._aborted = False
        # `finished` takes no result once the abort began: a check that ends after it was killed by it, and its
        # death is envcheck's doing, not the check's (the lock orders the abort against a lane's last record)
        self._finishing = threading.Lock()
        self._facts = FactsCollector(lambda: self.hooks.facts, self._worker, self.release, self._left)
        self.finished: list[Result] = []  # in the order they finished, for a report of an interrupted run

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        if kind is not None and not issubclass(kind, Exception):
            # Ctrl-C, SIGTERM: kill everything and wait on nothing; the threads still own their workers' pipes,
            # which go with the process.
            self.abort()
            return
        self.close()

    @property
    def notes(self) -> list[str]:
        """What the run did without (no writable temp dir for its private one), for the caller to say."""
        return [self._server.no_run_dir] if self._server.no_run_dir else []

    def start(self) -> None:
        """Spawn the fork server now, so its torch import overlaps whatever the caller does next."""
        self._server.start()

    def close(self) -> None:
        """Stop every worker and its process group, then the fork server; remove the run's private temp dir.
        A signal that comes meanwhile waits until that is done (then stops envcheck as usual)."""
        with signals.deferred():
            with self._lock:
                workers = list(self._workers.values())
                self._workers.clear()
            for worker in workers:  # all at once: each exits while the next is asked
                worker.ask_to_exit()
            for worker in workers:
                worker.close()
            self._server.close()

    def abort(self) -> None:
        """Kill every worker group and the fork server now, then remove the run's private temp dir; later checks
        are not run. Safe from any thread; a second signal cannot cut it short."""
        with signals.deferred(redeliver=False):
            with self._finishing:
                self._aborted = True
            self._server.abort()
            for worker in list(self._workers.values()):
                worker.abort()
            self._server.remove_run_dir()

    def _worker(self, group: str) -> WorkerHandle:
        with self._lock:
            if group not in self._workers:
                self._workers[group] = WorkerHandle(self._server)
            return self._workers[group]

    def release(self, group: str) -> None:
        """Close a group's worker (and so its CUDA context); the next request forks a fresh one."""
        with self._lock:
            worker = self._workers.pop(group, None)
        if worker is not None:
            worker.close()

    def _left(self) -> float | None:
        return None if self._deadline is None else self._deadline - time.monotonic()

    def time_left(self) -> float | None:
        """Seconds until the run's deadline (--timeout), or None without one."""
        return None if self._deadline is None else max(0.0, self._deadline - time.monotonic())

    def _until(self, timeout_s: float) -> float:
        left = self._left()
        return time.monotonic() + (timeout_s if left is None else min(timeout_s, left))

    def run(self, specs: Iterable[CheckSpec]) -> list[Result]:
        """Run every spec; a hung or crashed check becomes ERROR and the rest still run. Isolation groups run in
        lanes (`envcheck.core.lanes.plan`: one thread each, checks in a group in order); the modules the checks
        declare in `preload` are imported in the fork server once every lane's first worker is forked. Results keep
        spec order."""
        specs = list(specs)
        done: dict[int, Result] = {}

        def record(index: int, result: Result) -> None:
            with self._finishing:
                if self._aborted:
                    return
                done[index] = result
                self.finished.append(result)

        lanes_plan = plan(specs, self._share_gpu)
        groups, lanes, preloading, preloads = (
            lanes_plan.groups,
            lanes_plan.lanes,
            lanes_plan.preloading,
            lanes_plan.preloads,
        )
        first_forks = threading.Semaphore(0)
        preloaded = threading.Event()  # later GPU groups are forked after the preload, so they inherit it
        if not lanes_plan.waits_for_preload:
            preloaded.set()

        def run_lane(lane: list[str]) -> None:
            try:
                for n, group in enumerate(lane):
                    members = groups[group]
                    first = members[0][1]
                    if n > 0 and group in preloading:
                        preloaded.wait(max(0.0, self._until(first.timeout_s) - time.monotonic()))
                    began, timeout = time.monotonic(), self._timeout(first)
                    failure = self._worker(group).start(began + timeout) if timeout > 0 else None
                    if n == 0:
                        first_forks.release()
                    for m, (index, spec) in enumerate(members):
                        if m == 0 and failure is not None:  # the first check bears why its worker never came
                            record(index, failure_result(spec, failure, timeout, began))
                        else:
                            record(index, self.run_one(spec))
                    if n < len(lane) - 1:
                        self.release(group)
            # envcheck's own failure (or a limit it hit): the lane's unrun checks say so
            except Exception as exc:
                if self._aborted:
                    return
                cause = runtime_cause(exc, "envcheck could not run this check") or errored(
                    f"envcheck's own failure: {type(exc).__name__}: {exc}".splitlines()[0], crashed=True
                )
                for group in lane:
                    for index, spec in groups[group]:
                        if index not in done:
                            record(index, cause.named(spec.name, 0.0))

        def preload() -> None:
            # the first worker of every lane is forked before the server spends time importing
            for _ in lanes:
                first_forks.acquire()
            try:
                if not self._aborted:
                    answer = self._server.request(
                        {"op": Op.PRELOAD, "modules": preloads}, self._until(PRELOAD_TIMEOUT_S)
                    )
                    if isinstance(answer, dict) and answer.get("failed"):  # half-imported there: fork no more
                        self._server.retire()
            finally:
                preloaded.set()

        if groups:
            self.start()  # its torch import overlaps the inline checks (a no-op when it was started earlier)
        # the fork server imports the check modules (torch-free at import; they import the check registry, about
        # 0.3 s) before its first fork, so every lane's worker inherits them: each of five or six workers importing
        # them itself cost a quick run on 2 cores about 0.6 s
        self._server.import_first(sorted({spec.func.__module__ for spec in specs if spec.isolated}))
        threads = [threading.Thread(target=run_lane, args=(lane,), daemon=True) for lane in lanes]
        if not preloaded.is_set():  # only a later GPU group is forked after the first ones
            threads.append(threading.Thread(target=preload, daemon=True))
        inline: list[threading.Thread] = []
        for thread in threads:
            try:
                thread.start()
            except RuntimeError:  # "can't start new thread": a small `ulimit -u`/pids.max; run it here
                inline.append(thread)
        for index, spec in enumerate(specs):
            if not spec.isolated:
                record(index, self.run_one(spec))
        for thread in inline:
            preloaded.set()  # the lanes run one after another here: none may wait on a preload that never comes
            first_forks.release()
            thread.run()
        for thread in threads:
            while thread not in inline and thread.is_alive():
                thread.join(0.2)  # short joins keep Ctrl-C and SIGTERM responsive
        return [done.get(i) or self._unfinished(spec) for i, spec in enumerate(specs)]

    def _unfinished(self, spec: CheckSpec) -> Result:
        """A check whose lane ended before it ran (aborted, or envcheck's own failure there)."""
        return errored("not run: envcheck stopped before this check").named(spec.name, 0.0)

    def run_one(self, spec: CheckSpec) -> Result:
        """Run one check inline or isolated, within its timeout and what is left of the run's."""
        if self._aborted:
            return errored("not run: envcheck was interrupted").named(spec.name, 0.0)
        left = self._left()
        if left is not None and left <= 0:
            return errored(
                f"not run: the whole-run timeout of {self._total:g}s was reached",
                remediation="raise --timeout or narrow the run with --only",
            ).named(spec.name, 0.0)
        timeout = self._timeout(spec)
        if not spec.isolated:
            ctx = dataclasses.replace(self.ctx, deadline=time.monotonic() + timeout)
            return execute(spec, ctx, self.hooks.diagnose)
        start = time.monotonic()
        worker = self._worker(spec.group)
        failure = worker.start(start + timeout)
        if failure is not None:
            return failure_result(spec, failure, timeout, start)
        timeout = self._timeout(spec)  # the run's deadline may have come closer while the worker started
        if timeout <= 0:
            late = "not run: the whole-run --timeout was reached while its worker started"
            return failure_result(
                spec, WorkerFailure(FailureKind.TIMEOUT, late, run_deadline=True), timeout, start
            )
        ctx = dataclasses.replace(self.ctx, deadline=time.monotonic() + timeout)
        request = {
            "op": Op.CHECK,
            "name": spec.name,
            "context": ctx.to_dict(),
            "func": reference(spec.func),
            "needs": dataclasses.asdict(spec.needs),
            "hooks": self.hooks.references(),
        }
        reply = worker.request(request, timeout)
        if isinstance(reply, WorkerFailure):
            return failure_result(spec, reply, timeout, start)
        result = Result.from_dict(reply["result"])
        if reply.get("recycle"):  # a sticky CUDA error poisons the context: later checks get a fresh worker
            worker.close()
        if reply.get("output") and result.status.is_bad and not result.details:
            result = dataclasses.replace(result, details=reply["output"])
        return result

    def _timeout(self, spec: CheckSpec) -> float:
        """The check's own timeout, capped by what is left of the run's."""
        left = self._left()
        return spec.timeout_s if left is None else min(spec.timeout_s, left)

    def prefetch_facts(self) -> None:
        """Start collecting the facts now, in their own worker beside the checks; `facts()` then waits for them."""
        self._facts.prefetch()

    def facts(self) -> dict[str, Any]:
        """The environment facts, collected in a worker of their own (torch import and CUDA stay out of here)."""
        return self._facts.result()
