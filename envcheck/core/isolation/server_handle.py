"""The parent's handle on the fork server (`envcheck.core.isolation.forkserver`): start it, wait for its torch
import, ask it to fork a worker or preload modules, stop it. Every request is bounded by a deadline.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from typing import IO, Any

from envcheck.core import rundir, signals
from envcheck.core.isolation.failure import (
    FailureKind,
    WorkerFailure,
    close_fds,
    deadline_left,
    kill_group,
    tail,
)
from envcheck.core.isolation.forkserver import FDS_ENV, MAX_MESSAGE
from envcheck.core.isolation.protocol import Op
from envcheck.core.scratch import scratch_file

START_TIMEOUT_S = 30.0  # from spawning the server to its first word: only a hung site-packages takes longer
IMPORT_TIMEOUT_S = 180.0  # then for `import torch` (5 s on a fast host, a minute on a cold network disk)


Retired = tuple[subprocess.Popen[bytes], "socket.socket | None", "int | None", "IO[bytes] | None"]


class ServerHandle:
    """The parent's handle on the fork server: start it, wait for it, ask it to fork or preload."""

    def __init__(
        self,
        env: dict[str, str] | None = None,
        start_timeout_s: float = START_TIMEOUT_S,
        import_timeout_s: float = IMPORT_TIMEOUT_S,
        run_deadline: float | None = None,
    ) -> None:
        self._env = env
        self._start_timeout_s = start_timeout_s
        self._import_timeout_s = import_timeout_s
        self.run_deadline = (
            run_deadline  # bounds its start-up (set by the Runner that adopts an early server)
        )
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._lifeline_w: int | None = None
        self._log: IO[bytes] | None = None
        self._spawned_at = 0.0
        self._hello = False
        self.ready: dict[str, Any] | None = None
        self._failure: WorkerFailure | None = None
        self.run_dir: str | None = None  # the run's private temp dir (envcheck.core.rundir), once spawned
        self.no_run_dir: str | None = None  # why there is none
        # Servers replaced after a failed preload: alive until the run ends, for the workers forked from them.
        self._retired: list[Retired] = []
        self._made_run_dir = False
        self._first_imports: list[str] = []  # modules to import before the next fork (import_first)

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
        if not self._made_run_dir:  # one per run, shared by a server that replaces a retired one
            with (
                signals.deferred()
            ):  # made and recorded as one step: a signal between them would leak the dir
                self.run_dir, self.no_run_dir = rundir.create(env)
                self._made_run_dir = True
        if self.run_dir is not None:
            env[rundir.RUN_DIR_ENV] = self.run_dir
        env.setdefault("PYTHONFAULTHANDLER", "1")
        env["PYTHONUNBUFFERED"] = "1"
        env[FDS_ENV] = f"{theirs.fileno()},{life_r}"
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "envcheck.core.isolation.forkserver"],
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=self._log,
                env=env,
                pass_fds=(theirs.fileno(), life_r),
                start_new_session=True,
            )
        except OSError as exc:
            self._failure = WorkerFailure(FailureKind.START, f"the worker could not be started: {exc}")
            ours.close()
            close_fds(life_w)
            return
        finally:
            theirs.close()
            close_fds(life_r)
        self._sock, self._lifeline_w = ours, life_w
        self._spawned_at = time.monotonic()

    def _recv(self, deadline: float) -> dict[str, Any] | None:
        """The server's next message; None at the deadline; raises EOFError when it is gone."""
        assert self._sock is not None
        left = deadline_left(deadline)
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
        run_deadline = self.run_deadline if self.run_deadline is not None else float("inf")
        stages = (  # (done, what it waits for, its limit, what a missed limit means)
            (self._hello, "started", self._start_timeout_s, f"the worker did not start within "
             f"{self._start_timeout_s:g}s: something in site-packages (a .pth file, sitecustomize) hangs at import"),
            (self.ready is not None, "imported torch", self._start_timeout_s + self._import_timeout_s,
             f"the worker did not import torch within {self._import_timeout_s:g}s"),
        )  # fmt: skip
        try:
            for done, what, limit_s, missed in stages:
                if done:
                    continue
                limit = self._spawned_at + limit_s
                message = self._recv(min(run_deadline, limit))
                if message is None and time.monotonic() < limit:
                    text = f"timed out: the whole-run --timeout was reached while the worker {what}"
                    return WorkerFailure(FailureKind.TIMEOUT, text, tail(self._log), run_deadline=True)
                if message is None:
                    self._fail(WorkerFailure(FailureKind.START, missed, tail(self._log)))
                    return self._failure
                if what == "started":
                    self._hello = True
                else:
                    self.ready = message
        except (EOFError, ValueError):
            code = self._proc.wait(timeout=5) if self._proc is not None else None
            text = f"the worker exited at start-up (exit code {code})"
            self._fail(WorkerFailure(FailureKind.START, text, tail(self._log)))
            return self._failure
        return None

    def _fail(self, failure: WorkerFailure) -> None:
        self._failure = failure
        self._kill()

    def request(
        self, message: dict[str, Any], deadline: float, fds: tuple[int, ...] = ()
    ) -> dict[str, Any] | WorkerFailure:
        """Send one request (with `fds`) once the server is ready; its answer, or why there is none."""
        with self._lock:
            self._spawn()
            began = time.monotonic()
            failure = self._wait_ready()
            if failure is not None:
                return failure
            # the server's torch import is the run's fixed cost, never taken from a request's timeout
            run_deadline = self.run_deadline if self.run_deadline is not None else float("inf")
            if self._first_imports and message.get("op") == Op.FORK:
                self._import_first_now(min(run_deadline, time.monotonic() + IMPORT_TIMEOUT_S))
            waited = time.monotonic() - began
            deadline = min(deadline + waited, run_deadline)
            assert self._sock is not None
            try:
                socket.send_fds(self._sock, [json.dumps(message).encode()], list(fds))
                answer = self._recv(deadline)
            except (EOFError, OSError, ValueError) as exc:
                self._fail(
                    WorkerFailure(FailureKind.START, f"the worker server died ({exc})", tail(self._log))
                )
                return self._failure  # type: ignore[return-value]
            if answer is None:  # it is stuck (a preload that hangs): nothing more can be forked from it
                self._fail(
                    WorkerFailure(
                        FailureKind.TIMEOUT,
                        f"the worker server did not answer {message.get('op')}",
                        tail(self._log),
                    )
                )
                return self._failure  # type: ignore[return-value]
            return answer

    def import_first(self, modules: list[str]) -> None:
        """Import `modules` (light ones: the check modules) in the server before its next fork: workers inherit them."""
        with self._lock:
            self._first_imports = list(modules)

    def _import_first_now(self, deadline: float) -> None:
        """The pending first imports (under the lock, the server ready); a failure is each check's to name."""
        assert self._sock is not None
        modules, self._first_imports = self._first_imports, []
        with contextlib.suppress(EOFError, OSError, ValueError):  # the FORK that follows meets a dead server
            socket.send_fds(self._sock, [json.dumps({"op": Op.PRELOAD, "modules": modules}).encode()], [])
            self._recv(deadline)

    def retire(self) -> None:
        """Fork later workers from a fresh server: this one's preload failed part-way, so what it imported is
        half-initialised and every worker forked from it would inherit that (a second import of the module then
        fails differently, hiding the cause). It stays alive for the workers it already forked, until `close`."""
        with self._lock:
            if self._proc is not None:
                self._retired.append((self._proc, self._sock, self._lifeline_w, self._log))
            self._proc, self._sock, self._lifeline_w, self._log = None, None, None, None
            self._hello, self.ready, self._failure = False, None, None

    def _kill(self) -> None:
        for old, sock, lifeline_w, log in self._retired:
            if sock is not None:
                sock.close()
            if lifeline_w is not None:
                close_fds(lifeline_w)
            kill_group(old.pid)
            try:
                old.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            if log is not None:
                log.close()
        self._retired.clear()
        proc, self._proc = self._proc, None
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._lifeline_w is not None:
            close_fds(self._lifeline_w)
            self._lifeline_w = None
        if proc is not None:
            kill_group(proc.pid)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass

    def close(self) -> None:
        """Stop the server (every worker sees the lifeline close and kills its group), remove the run's dir."""
        self._kill()
        if self._log is not None:
            self._log.close()
            self._log = None
        self.remove_run_dir()

    def remove_run_dir(self) -> None:
        """Remove the run's private temp dir (every process that wrote there is dead or being killed)."""
        rundir.remove(self.run_dir)

    def abort(self) -> None:
        """Kill the server now, from any thread, without waiting for a lock."""
        for proc in [self._proc, *(r[0] for r in self._retired)]:
            if proc is not None:
                kill_group(proc.pid)
        retired, self._retired = self._retired, []
        for proc, sock, lifeline_w, log in retired:  # their workers watch these lifelines: EOF ends them too
            if lifeline_w is not None:
                close_fds(lifeline_w)
            self._retired.append((proc, sock, None, log))
        if self._lifeline_w is not None:
            close_fds(self._lifeline_w)
            self._lifeline_w = None
