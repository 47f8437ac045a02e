"""Run bench units with the engine's isolation: the core Runner and Worker, pointed at the bench worker.

The only difference from `envcheck run` is the worker module the child interpreter starts; the
timeouts, process-group kill, crash-to-ERROR and whole-run deadline are the core's.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from envcheck.core.isolation import Worker
from envcheck.core.runner import Runner

BENCH_WORKER_MODULE = "envcheck.bench.worker"


class BenchWorker(Worker):
    """A core Worker whose child runs `envcheck.bench.worker` instead of `envcheck.core.worker`."""

    def start(self) -> None:
        """Spawn the child in its own session (no-op when it is alive)."""
        if self._proc is not None and self._proc.poll() is None:
            return
        self._log = tempfile.TemporaryFile(prefix="envcheck-bench-worker-")
        env = dict(os.environ if self._env is None else self._env)
        env.setdefault("PYTHONFAULTHANDLER", "1")
        env["PYTHONUNBUFFERED"] = "1"
        self._buf = b""
        self._proc = subprocess.Popen(  # noqa: S603 - fixed argument list, no shell
            [sys.executable, "-m", BENCH_WORKER_MODULE],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, env=env, start_new_session=True,
        )


class BenchRunner(Runner):
    """The core Runner, with one BenchWorker per isolation group."""

    def _worker(self, group: str) -> Worker:
        if group not in self._workers:
            self._workers[group] = BenchWorker()
        return self._workers[group]
