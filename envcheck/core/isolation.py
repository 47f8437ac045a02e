"""The parent side of isolation: spawn a worker, bound every request with a wall-clock timeout.

A worker is a fresh interpreter (`python -m envcheck.core.worker`, so nothing is forked after CUDA
is initialised) in its own session. On timeout or crash the whole process group is killed, so
the ranks or DataLoader workers a check started die with it.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import IO, Any

MAX_DETAILS = 20_000
_EOF = b"\x00eof"  # sentinel: the child closed its reply pipe (it died)


@dataclass(frozen=True)
class WorkerFailure:
    """The worker timed out or died instead of answering."""

    reason: str
    output: str


class Worker:
    """One long-lived child interpreter that answers JSON requests."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self._env = env
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._buf = b""

    def start(self) -> None:
        """Spawn the child (no-op when it is alive)."""
        if self._proc is not None and self._proc.poll() is None:
            return
        self._log = tempfile.TemporaryFile(prefix="envcheck-worker-")
        env = dict(os.environ if self._env is None else self._env)
        env.setdefault("PYTHONFAULTHANDLER", "1")
        env["PYTHONUNBUFFERED"] = "1"
        self._buf = b""
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "envcheck.core.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=env,
            start_new_session=True,
        )

    @property
    def pid(self) -> int | None:
        """PID of the live child, if any."""
        return self._proc.pid if self._proc is not None else None

    def request(self, payload: dict[str, Any], timeout_s: float) -> dict[str, Any] | WorkerFailure:
        """Send one request; return the reply, or a WorkerFailure after killing the child."""
        self.start()
        assert self._proc is not None and self._proc.stdin is not None and self._log is not None
        mark = self._log_size()
        try:
            self._proc.stdin.write((json.dumps(payload) + "\n").encode())
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return self._died(mark)
        line = self._read_line(time.monotonic() + timeout_s)
        if line is _EOF:
            return self._died(mark)
        if line is None:
            self.kill()
            return WorkerFailure(f"timed out after {timeout_s:g}s; its process group was killed",
                                 self._output_since(mark))
        reply: dict[str, Any] = json.loads(line)
        reply["output"] = self._output_since(mark)
        return reply

    def _read_line(self, deadline: float) -> bytes | None:
        """The next reply line; None at the deadline; _EOF when the child closed its end."""
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buf:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    return None
                chunk = os.read(fd, 65536)
                if not chunk:
                    return _EOF
                self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    def _died(self, mark: int) -> WorkerFailure:
        assert self._proc is not None
        try:
            code = self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        self.kill()
        if code is not None and code < 0:
            try:
                what = f"killed by {signal.Signals(-code).name}"
            except ValueError:
                what = f"killed by signal {-code}"
        else:
            what = f"exited with code {code}"
        return WorkerFailure(f"the check's process died ({what})", self._output_since(mark))

    def _log_size(self) -> int:
        assert self._log is not None
        return os.fstat(self._log.fileno()).st_size

    def _output_since(self, mark: int) -> str:
        if self._log is None:
            return ""
        self._log.seek(mark)
        data = self._log.read().decode(errors="replace")
        return data[-MAX_DETAILS:]

    def kill(self) -> None:
        """Kill the child's whole process group and reap it."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass

    def close(self) -> None:
        """Ask the child to exit (close its stdin), then make sure its group is gone."""
        proc = self._proc
        if proc is not None and proc.poll() is None and proc.stdin is not None:
            try:
                proc.stdin.close()
                proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()
        if self._log is not None:
            self._log.close()
            self._log = None
