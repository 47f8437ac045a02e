"""Start a gloo rank by fork(): no fresh interpreter, so no per-rank torch import (seconds each).

Only used when the coordinator has not initialised CUDA (forking after CUDA init is unsafe). The
child keeps the parent's process group, runs with one intra-op thread (as DataLoader workers do,
which sidesteps OpenMP's fork problem), writes its output to the rank log and never returns.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable


class ForkedRank:
    """The subset of `subprocess.Popen` the coordinator uses, for a forked child."""

    def __init__(self, target: Callable[[], int], log_path: str, env: dict[str, str]) -> None:
        log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        pid = os.fork()
        if pid == 0:  # child: never returns into the caller's stack
            code = 70
            try:
                os.dup2(log_fd, 1)
                os.dup2(log_fd, 2)
                os.environ.clear()
                os.environ.update(env)
                import torch

                torch.set_num_threads(1)
                code = target()
            finally:
                os._exit(code)
        os.close(log_fd)
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """Exit status if the child has ended (negative signal number when killed), else None."""
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Block until the child ends; the coordinator only calls this after SIGKILL."""
        if self.poll() is None:
            _, status = os.waitpid(self.pid, 0)
            self.returncode = os.waitstatus_to_exitcode(status)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(str(self.pid), timeout or 0)
        return self.returncode

    def send_signal(self, sig: int = signal.SIGKILL) -> None:
        """Signal the child (no-op once reaped)."""
        if self.returncode is None:
            os.kill(self.pid, sig)
