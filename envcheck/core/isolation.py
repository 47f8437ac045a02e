"""The parent side of isolation: one fork server per run, one forked worker per group, every request bounded.

The fork server (`envcheck.core.forkserver`) is a fresh interpreter in its own session that imports torch
once and never initialises CUDA; each worker is forked from it, calls setsid, and initialises CUDA itself.
On timeout or crash the worker's whole process group is killed, so the ranks or DataLoader workers a check
started die with it. Whatever ends envcheck, its workers end too: the server and every worker watch a
lifeline (the control socket, a pipe whose only write end envcheck holds) and kill their groups at EOF.
"""

from __future__ import annotations

import enum
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import IO, Any

from envcheck.core.forkserver import FDS_ENV, MAX_MESSAGE
from envcheck.core.protocol import Op
from envcheck.core.scratch import scratch_file

MAX_DETAILS = 20_000
START_TIMEOUT_S = 30.0  # from spawning the server to its first word: only a hung site-packages takes longer
IMPORT_TIMEOUT_S = 180.0  # then for `import torch` (5 s on a fast host, a minute on a cold network disk)
_EOF = b"\x00eof"  # sentinel: the child closed its reply pipe (it died)


class FailureKind(str, enum.Enum):
    """Why a worker gave no answer."""

    TIMEOUT = "timeout"  # it ran past its deadline and its process group was killed
    SIGNAL = "signal"  # it was killed by a signal (a segfault, the OOM killer)
    EXIT = "exit"  # it exited
    PROTOCOL = "protocol"  # it answered something that is not a reply
    START = "start"  # it could not be started


@dataclass(frozen=True)
class WorkerFailure:
    """The worker timed out, died or could not start instead of answering."""

    kind: FailureKind
    reason: str
    output: str = ""
    run_deadline: bool = False  # the whole-run deadline, not the check's own timeout, ended it (says so already)


def _deadline_left(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())


def _tail(log: IO[bytes] | None, mark: int = 0) -> str:
    if log is None or log.closed:
        return ""
    log.seek(mark)
    return log.read().decode(errors="replace")[-MAX_DETAILS:]


def _kill_group(pid: int) -> None:
    for kill in (os.killpg, os.kill):  # before its setsid the worker has no group of its own yet
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _close(*fds: int) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


class ForkServer:
    """The parent's handle on the fork server: start it, wait for it, ask it to fork or preload."""

    def __init__(self, env: dict[str, str] | None = None, start_timeout_s: float = START_TIMEOUT_S,
                 import_timeout_s: float = IMPORT_TIMEOUT_S, run_deadline: float | None = None) -> None:
        self._env = env
        self._start_timeout_s = start_timeout_s
        self._import_timeout_s = import_timeout_s
        self._run_deadline = run_deadline
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._lifeline_w: int | None = None
        self._log: IO[bytes] | None = None
        self._spawned_at = 0.0
        self._hello = False
        self.ready: dict[str, Any] | None = None
        self._failure: WorkerFailure | None = None

    @property
    def pid(self) -> int | None:
        """PID of the server, once spawned."""
        return self._proc.pid if self._proc is not None else None

    def start(self) -> None:
        """Spawn the server without waiting for it (its torch import overlaps whatever the caller does next)."""
        with self._lock:
            self._spawn()

    def _spawn(self) -> None:
        if self._proc is not None or self._failure is not None:
            return
        try:  # a low `ulimit -n` ends here: a START failure naming it, never a traceback
            self._log = scratch_file("envcheck-forkserver")
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        except OSError as exc:
            self._failure = WorkerFailure(FailureKind.START, f"the worker could not be started: {exc}")
            return
        try:
            life_r, life_w = os.pipe()
        except OSError as exc:
            ours.close()
            theirs.close()
            self._failure = WorkerFailure(FailureKind.START, f"the worker could not be started: {exc}")
            return
        env = dict(os.environ if self._env is None else self._env)
        env.setdefault("PYTHONFAULTHANDLER", "1")
        env["PYTHONUNBUFFERED"] = "1"
        env[FDS_ENV] = f"{theirs.fileno()},{life_r}"
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "envcheck.core.forkserver"],
                stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log, env=env,
                pass_fds=(theirs.fileno(), life_r), start_new_session=True,
            )
        except OSError as exc:
            self._failure = WorkerFailure(FailureKind.START, f"the worker could not be started: {exc}")
            ours.close()
            _close(life_w)
            return
        finally:
            theirs.close()
            _close(life_r)
        self._sock, self._lifeline_w = ours, life_w
        self._spawned_at = time.monotonic()

    def _recv(self, deadline: float) -> dict[str, Any] | None:
        """The server's next message; None at the deadline; raises EOFError when it is gone."""
        assert self._sock is not None
        left = _deadline_left(deadline)
        if left <= 0:
            return None
        self._sock.settimeout(left)
        try:
            data = self._sock.recv(MAX_MESSAGE)
        except TimeoutError:
            return None
        except OSError as exc:
            raise EOFError(str(exc)) from None
        if not data:
            raise EOFError("EOF")
        message: dict[str, Any] = json.loads(data)
        return message

    def _wait_ready(self) -> WorkerFailure | None:
        """Wait for the handshake (within the start timeout), then for torch (within the import timeout).

        Neither counts against a check's own timeout: both are the run's fixed cost, bounded by the run's
        deadline."""
        if self._failure is not None:
            return self._failure
        if self._proc is None:
            return WorkerFailure(FailureKind.START, "the worker server was closed")
        run_deadline = self._run_deadline if self._run_deadline is not None else float("inf")
        try:
            if not self._hello:
                limit = self._spawned_at + self._start_timeout_s
                if self._recv(min(run_deadline, limit)) is None:
                    if time.monotonic() < limit:
                        return WorkerFailure(FailureKind.TIMEOUT, "timed out: the whole-run --timeout was reached"
                                             " while the worker started", _tail(self._log), run_deadline=True)
                    self._fail(WorkerFailure(
                        FailureKind.START,
                        f"the worker did not start within {self._start_timeout_s:g}s: something in site-packages"
                        " (a .pth file, sitecustomize) hangs at import",
                        _tail(self._log)))
                    return self._failure
                self._hello = True
            if self.ready is None:
                limit = self._spawned_at + self._start_timeout_s + self._import_timeout_s
                ready = self._recv(min(run_deadline, limit))
                if ready is None:
                    if time.monotonic() < limit:
                        return WorkerFailure(FailureKind.TIMEOUT, "timed out: the whole-run --timeout was reached"
                                             " while the worker imported torch", _tail(self._log), run_deadline=True)
                    self._fail(WorkerFailure(
                        FailureKind.START, f"the worker did not import torch within {self._import_timeout_s:g}s",
                        _tail(self._log)))
                    return self._failure
                self.ready = ready
        except (EOFError, ValueError):
            code = self._proc.wait(timeout=5) if self._proc is not None else None
            self._fail(WorkerFailure(FailureKind.START, f"the worker exited at start-up (exit code {code})",
                                     _tail(self._log)))
            return self._failure
        return None

    def _fail(self, failure: WorkerFailure) -> None:
        self._failure = failure
        self._kill()

    def request(self, message: dict[str, Any], deadline: float, fds: tuple[int, ...] = ()) -> dict[str, Any] | WorkerFailure:
        """Send one request (with `fds`) once the server is ready; its answer, or why there is none."""
        with self._lock:
            self._spawn()
            failure = self._wait_ready()
            if failure is not None:
                return failure
            assert self._sock is not None
            try:
                socket.send_fds(self._sock, [json.dumps(message).encode()], list(fds))
                answer = self._recv(deadline)
            except (EOFError, OSError, ValueError) as exc:
                self._fail(WorkerFailure(FailureKind.START, f"the worker server died ({exc})", _tail(self._log)))
                return self._failure  # type: ignore[return-value]
            if answer is None:  # it is stuck (a preload that hangs): nothing more can be forked from it
                self._fail(WorkerFailure(FailureKind.TIMEOUT, f"the worker server did not answer {message.get('op')}",
                                         _tail(self._log)))
                return self._failure  # type: ignore[return-value]
            return answer

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._lifeline_w is not None:
            _close(self._lifeline_w)
            self._lifeline_w = None
        if proc is not None:
            _kill_group(proc.pid)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass

    def close(self) -> None:
        """Stop the server; every worker sees the lifeline close and kills its group."""
        self._kill()
        if self._log is not None:
            self._log.close()
            self._log = None

    def abort(self) -> None:
        """Kill the server now, from any thread, without waiting for a lock."""
        proc = self._proc
        if proc is not None:
            _kill_group(proc.pid)
        if self._lifeline_w is not None:
            _close(self._lifeline_w)
            self._lifeline_w = None


class Worker:
    """One forked child that answers JSON requests on its own pipes."""

    def __init__(self, server: ForkServer) -> None:
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
            _close(*opened)
            return WorkerFailure(FailureKind.START, f"the worker could not be started: {exc}")
        req_r, req_w, rep_r, rep_w, status_r, status_w = opened
        answer = self._server.request({"op": Op.FORK}, deadline, (req_r, rep_w, self._log.fileno(), status_w))
        _close(req_r, rep_w, status_w)
        if isinstance(answer, WorkerFailure) or "pid" not in answer:
            _close(req_w, rep_r, status_r)
            return answer if isinstance(answer, WorkerFailure) else WorkerFailure(
                FailureKind.START, f"the worker could not be forked: {answer.get('error')}")
        self._pid, self._req, self._rep, self._status, self._buf = int(answer["pid"]), req_w, rep_r, status_r, b""
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
            return WorkerFailure(FailureKind.TIMEOUT, f"timed out after {timeout_s:g}s; its process group was killed",
                                 _tail(self._log, mark))
        try:
            reply: dict[str, Any] = json.loads(line)
        except ValueError:
            self.kill()
            return WorkerFailure(FailureKind.PROTOCOL, f"the worker answered something that is not a reply: {line[:200]!r}",
                                 _tail(self._log, mark))
        reply["output"] = _tail(self._log, mark)
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
        output = _tail(self._log, mark)
        self.kill()
        if code is not None and code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return WorkerFailure(FailureKind.SIGNAL, f"the check's process died (killed by {name})", output)
        return WorkerFailure(FailureKind.EXIT, f"the check's process died (exited with code {code})", output)

    def kill(self, wait: bool = True) -> None:
        """Kill the child's whole process group and wait (briefly) for the server to reap it."""
        pid, self._pid = self._pid, None
        if pid is None:
            return
        _kill_group(pid)
        if wait:  # returns at once when the exit was already read (the server closed the status pipe)
            self._exit_code(10)
        _close(self._req, self._rep, self._status)
        self._req = self._rep = self._status = -1

    def abort(self) -> None:
        """Kill the child's group now, from any thread; its pipes stay open for the thread using them."""
        if self._pid is not None:
            _kill_group(self._pid)

    def close(self) -> None:
        """Ask the child to exit (close its request pipe), then make sure its group is gone."""
        if self._pid is not None:
            _close(self._req)
            self._req = -1
            self._exit_code(5)
        self.kill()  # the group is gone (and a GPU context released) before the next GPU group is forked
        if self._log is not None:
            self._log.close()
            self._log = None
