"""The parent's handle on one forked worker (`envcheck.core.isolation.worker`): fork it through the fork server,
send it a request, read its reply within the check's timeout, kill its whole process group.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import time
from typing import IO, Any

from envcheck.core import rundir
from envcheck.core.isolation.failure import FailureKind, WorkerFailure, close_fds, kill_group, tail
from envcheck.core.isolation.protocol import Op
from envcheck.core.isolation.server_handle import ServerHandle
from envcheck.core.scratch import scratch_file

_EOF = b"\x00eof"  # sentinel: the child closed its reply pipe (it died)


class WorkerHandle:
    """One forked child that answers JSON requests on its own pipes."""

    def __init__(self, server: ServerHandle) -> None:
        self._server = server
        self._pid: int | None = None
        self._log: IO[bytes] | None = None
        self._req = self._rep = self._status = -1
        self._buf = b""

    @property
    def pid(self) -> int | None:
        """PID of the live child, if any."""
        return self._pid

    def start(self, deadline: float) -> WorkerFailure | None:
        """Fork the child (no-op when it is alive); why it could not be, or None."""
        if self._pid is not None:
            return None
        opened: list[int] = []
        try:  # a low `ulimit -n` ends here: a START failure naming it, never a traceback
            self._log = self._log or scratch_file("envcheck-worker")
            for _ in range(3):
                opened.extend(os.pipe())
        except OSError as exc:
            close_fds(*opened)
            return WorkerFailure(FailureKind.START, f"the worker could not be started: {exc}")
        req_r, req_w, rep_r, rep_w, status_r, status_w = opened
        answer = self._server.request({"op": Op.FORK}, deadline, (req_r, rep_w, self._log.fileno(), status_w))
        close_fds(req_r, rep_w, status_w)
        if isinstance(answer, WorkerFailure) or "pid" not in answer:
            close_fds(req_w, rep_r, status_r)
            return (
                answer
                if isinstance(answer, WorkerFailure)
                else WorkerFailure(
                    FailureKind.START, f"the worker could not be forked: {answer.get('error')}"
                )
            )
        self._pid, self._req, self._rep, self._status, self._buf = (
            int(answer["pid"]),
            req_w,
            rep_r,
            status_r,
            b"",
        )
        return None

    def request(self, payload: dict[str, Any], timeout_s: float) -> dict[str, Any] | WorkerFailure:
        """Send one request; return the reply, or a WorkerFailure after killing the child."""
        failure = self.start(time.monotonic() + timeout_s)
        if failure is not None:
            return failure
        deadline = time.monotonic() + timeout_s  # the check's own time starts once its worker is there
        assert self._log is not None
        mark = os.fstat(self._log.fileno()).st_size
        try:
            os.write(self._req, (json.dumps(payload) + "\n").encode())
        except OSError:
            return self._died(mark)
        line = self._read_line(deadline)
        if line is _EOF:
            return self._died(mark)
        if line is None:
            self.kill()
            return WorkerFailure(
                FailureKind.TIMEOUT,
                f"timed out after {timeout_s:g}s; its process group was killed",
                tail(self._log, mark),
            )
        try:
            reply: dict[str, Any] = json.loads(line)
        except ValueError:
            self.kill()
            return WorkerFailure(
                FailureKind.PROTOCOL,
                f"the worker answered something that is not a reply: {line[:200]!r}",
                tail(self._log, mark),
            )
        reply["output"] = tail(self._log, mark)
        return reply

    def _read_line(self, deadline: float) -> bytes | None:
        """The next reply line; None at the deadline; _EOF when the child closed its end."""
        with selectors.DefaultSelector() as sel:
            sel.register(self._rep, selectors.EVENT_READ)
            while b"\n" not in self._buf:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    return None
                chunk = os.read(self._rep, 65536)
                if not chunk:
                    return _EOF
                self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    def _exit_code(self, wait_s: float) -> int | None:
        """The child's exit code (negative: the signal), as the server reports it once it reaped it."""
        try:
            with selectors.DefaultSelector() as sel:
                sel.register(self._status, selectors.EVENT_READ)
                if not sel.select(wait_s):
                    return None
            data = os.read(self._status, 64)
        except (OSError, ValueError):  # closed meanwhile (an abort raced us): the code is unknown
            return None
        return int(data) if data.strip() else None

    def _died(self, mark: int) -> WorkerFailure:
        code = self._exit_code(5)
        output = tail(self._log, mark)
        self.kill()
        if code is not None and code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return WorkerFailure(FailureKind.SIGNAL, f"the check's process died (killed by {name})", output)
        return WorkerFailure(FailureKind.EXIT, f"the check's process died (exited with code {code})", output)

    def kill(self, wait: bool = True) -> None:
        """Kill the child's whole process group, wait (briefly) for the server to reap it, remove its temp dir."""
        pid, self._pid = self._pid, None
        if pid is None:
            return
        kill_group(pid)
        if wait:  # returns at once when the exit was already read (the server closed the status pipe)
            self._exit_code(10)
        close_fds(self._req, self._rep, self._status)
        self._req = self._rep = self._status = -1
        if self._server.run_dir is not None:  # what its killed DataLoader workers or compiles left there
            rundir.remove(rundir.worker_dir(self._server.run_dir, pid), wait_s=1.0 if wait else 0.0)

    def abort(self) -> None:
        """Kill the child's group now, from any thread; its pipes stay open for the thread using them."""
        if self._pid is not None:
            kill_group(self._pid)

    def ask_to_exit(self) -> None:
        """Close the child's request pipe: it leaves its loop and exits (`close` then waits for it)."""
        if self._pid is not None and self._req >= 0:
            close_fds(self._req)
            self._req = -1

    def close(self) -> None:
        """Ask the child to exit (close its request pipe), then make sure its group is gone."""
        if self._pid is not None:
            self.ask_to_exit()
            self._exit_code(5)
        self.kill()  # the group is gone (and a GPU context released) before the next GPU group is forked
        if self._log is not None:
            self._log.close()
            self._log = None
