"""The fork server: one interpreter that imports torch once (never CUDA) and forks a worker per isolation group.

Started by the parent side (`envcheck.core.isolation.server_handle.ServerHandle`) as
`python -m envcheck.core.isolation.forkserver` in a session of its own, it talks over a SOCK_SEQPACKET socket (fd
numbers in ENVCHECK_FORKSERVER_FDS):

- to the parent, first `{"hello": pid}` as soon as the interpreter runs (the start-up handshake: whatever
  site-packages does at start-up is over), then `{"ready": ...}` once torch is imported;
- `{"op": "fork"}` with four fds (request pipe, reply pipe, log file, status pipe): forks a worker, answers
  `{"pid": pid}`, and writes the worker's exit code to the status pipe when it reaps it;
- `{"op": "preload", "modules": [...]}`: imports heavy modules once, so later forks inherit them;
- `{"op": "state"}`: what is imported, and whether CUDA was initialised here (it must never be).

EOF on the socket (envcheck ended, however) makes it kill every worker's process group, remove the run's
private temp dir (ENVCHECK_RUN_DIR, see `envcheck.core.rundir`) and exit. Forking
after CUDA is initialised is unsafe, so nothing here touches `torch.cuda` beyond `is_initialized()`.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import os
import selectors
import signal
import socket
import sys
import tempfile
import traceback
from typing import Any

from envcheck.core import rundir
from envcheck.core.isolation.protocol import Op

FDS_ENV = "ENVCHECK_FORKSERVER_FDS"
MAX_MESSAGE = 65536


def send(sock: socket.socket, message: dict[str, Any]) -> None:
    """One JSON message as one packet."""
    sock.sendall(json.dumps(message).encode())


def preload(modules: list[str], run_dir: str | None = None) -> dict[str, Any]:
    """Import `modules` here; a module that fails is named with its error, never fatal. An import may write a
    temp-dir path into the environment and make the folder (torch._dynamo computes Inductor's cache dir and writes it
    into TORCHINDUCTOR_CACHE_DIR): with a run dir it does that in the run's shared dir, not in the user's temp dir
    (paths a module keeps in its globals stay there, removed with the run), and the environment is set back either
    way, so a worker forked later starts with the user's own (envcheck.core.rundir.user_env)."""
    loaded, failed = [], {}
    saved = {name: os.environ.get(name) for name in rundir.MOVED}
    shared = rundir.shared_dir(run_dir) if any(m not in sys.modules for m in modules) else None
    if shared:  # made for the imports, and removed again below when none of them wrote there
        os.environ["TMPDIR"] = shared
        tempfile.tempdir = None  # gettempdir() caches; the next call reads TMPDIR again
    try:
        for name in modules:
            try:
                importlib.import_module(name)
                loaded.append(name)
            except BaseException as exc:  # an import may raise anything, SystemExit included
                failed[name] = f"{type(exc).__name__}: {exc}".splitlines()[0]
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        tempfile.tempdir = None
        if shared:
            with contextlib.suppress(OSError):
                os.rmdir(shared)
    return {"loaded": loaded, "failed": failed, "cuda_initialized": cuda_initialized()}


def cuda_initialized() -> bool:
    """Whether CUDA was initialised in this process (reads a flag; initialises nothing)."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    return bool(cuda is not None and cuda.is_initialized())


class ForkLoop:
    """The fork loop."""

    def __init__(self, sock: socket.socket, lifeline: int, run_dir: str | None = None) -> None:
        self.sock = sock
        self.lifeline = lifeline
        self.run_dir = run_dir  # the run's private temp dir: each worker makes its own part of it its TMPDIR
        self.children: dict[int, int] = {}  # worker pid -> write end of its status pipe
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)

    def serve(self) -> None:
        """Answer requests until the parent's end of the socket closes."""
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        with selectors.DefaultSelector() as sel:
            sel.register(self.sock, selectors.EVENT_READ)
            sel.register(self.wake_r, selectors.EVENT_READ)
            while True:
                for key, _ in sel.select():
                    if key.fileobj == self.wake_r:
                        while True:
                            try:
                                if not os.read(self.wake_r, 512):
                                    break
                            except BlockingIOError:
                                break
                        self.reap()
                    elif not self.answer():
                        return

    def answer(self) -> bool:
        """Handle one request; False at EOF."""
        try:
            data, fds, _, _ = socket.recv_fds(self.sock, MAX_MESSAGE, 8)
        except InterruptedError:
            return True
        except OSError:
            return False
        if not data:
            return False
        request = json.loads(data)
        op = request.get("op")
        if (
            op == Op.FORK and cuda_initialized()
        ):  # a preload did it: a forked child would inherit a broken CUDA
            send(
                self.sock,
                {
                    "error": "CUDA was initialised in the fork server (by a preloaded module), so "
                    "forking a worker from it is unsafe"
                },
            )
            op = "refused"
        elif op == Op.FORK:
            try:
                send(self.sock, {"pid": self.fork(fds)})
            except (
                OSError
            ) as exc:  # BlockingIOError under a low `ulimit -u`: an error result, not a dead server
                from envcheck.core.errors import process_start_problem

                for fd in fds:
                    with contextlib.suppress(OSError):
                        os.close(fd)
                send(self.sock, {"error": process_start_problem(exc)})
        elif op == Op.PRELOAD:
            send(self.sock, preload(list(request.get("modules", [])), self.run_dir))
        elif op == Op.STATE:
            send(
                self.sock,
                {
                    "pid": os.getpid(),
                    "cuda_initialized": cuda_initialized(),
                    "modules": sorted(m for m in ("torch", *request.get("modules", ())) if m in sys.modules),
                },
            )
        else:
            send(self.sock, {"error": f"unknown op {op!r}"})
        for fd in fds if op != "fork" else ():
            os.close(fd)
        return True

    def fork(self, fds: list[int]) -> int:  # raises OSError when the fork fails (fds still open)
        """Fork one worker; the parent keeps only the status pipe's write end."""
        requests, replies, log, status = fds
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        server_pid = os.getpid()
        pid = os.fork()
        if pid == 0:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            from envcheck.core.isolation.worker import run_forked

            self.sock.close()
            for fd in (status, self.wake_r, self.wake_w, *self.children.values()):
                os.close(fd)
            run_forked(requests, replies, log, self.lifeline, server_pid, self.run_dir)
        for fd in (requests, replies, log):
            os.close(fd)
        self.children[pid] = status
        return pid

    def reap(self) -> None:
        """Collect exited workers and tell the parent each one's exit code."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            fd = self.children.pop(pid, None)
            if fd is not None:
                try:
                    os.write(fd, str(os.waitstatus_to_exitcode(status)).encode())
                except OSError:
                    pass
                os.close(fd)

    def shutdown(self) -> None:
        """Kill every worker's process group."""
        for pid in list(self.children):
            for kill in (os.killpg, os.kill):
                try:
                    kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        self.reap()


def main() -> None:
    """Handshake, import torch once, then fork workers on request. However this ends (envcheck gone even before
    the handshake: a broken pipe), the run's dir goes with it."""
    control, lifeline = (int(fd) for fd in os.environ.pop(FDS_ENV).split(","))
    run_dir = os.environ.pop(rundir.RUN_DIR_ENV, None)
    rundir.hold(
        run_dir
    )  # in use while this server or a worker forked from it lives (envcheck.core.stale_rundirs)
    server: ForkLoop | None = None
    code = 0
    try:
        sock = socket.socket(fileno=control)
        send(sock, {"hello": os.getpid()})
        modules = ["torch"] if importlib.util.find_spec("torch") is not None else []
        # torch's own import writes no temp path (checked with 2.13 and 2.15), so it runs in the user's temp dir
        send(sock, {"ready": True, **preload(modules)})
        server = ForkLoop(sock, lifeline, run_dir)
        server.serve()
    except (BrokenPipeError, ConnectionResetError):  # envcheck is gone (SIGKILL) while torch imported here
        pass
    except BaseException:  # the parent shows the log's tail as the worker's start failure
        traceback.print_exc()
        code = 1
    finally:
        if server is not None:
            server.shutdown()
        rundir.remove(run_dir)  # envcheck is gone (even by SIGKILL) or done: nothing of the run stays
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(code)


if __name__ == "__main__":
    main()
