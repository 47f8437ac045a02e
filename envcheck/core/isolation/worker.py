"""The child side of isolation: a process forked by the fork server that runs one group's checks.

Protocol: one JSON request per line on its own request pipe, one JSON reply per line on its own reply pipe
(inherited fds, never stdout), so nothing a check or an import prints can corrupt it. Everything the process
prints (Python or C level) goes to the log file the parent reads back.

A worker never outlives envcheck: the kernel kills it when the fork server dies (PR_SET_PDEATHSIG), and a
watchdog thread kills its whole process group (ranks, DataLoader workers) when envcheck's lifeline pipe
reaches EOF, which happens however envcheck ends, SIGKILL included.
"""

from __future__ import annotations

import ctypes
import importlib
import importlib.util
import json
import os
import select
import signal
import sys
import threading
from typing import Any

from envcheck.core import rundir
from envcheck.core.check import CheckSpec, Context, Needs
from envcheck.core.execute import jsonable, run_check
from envcheck.core.isolation.process_state import Saved
from envcheck.core.isolation.protocol import Op

PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """Ask the kernel to send `sig` to this process when its parent dies (Linux; a no-op elsewhere)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def watch_lifeline(fd: int) -> None:
    """Kill this process group when `fd` (the read end of envcheck's lifeline pipe) reaches EOF."""

    def watch() -> None:
        while True:
            try:
                ready, _, _ = select.select([fd], [], [])
                if ready and not os.read(fd, 1):
                    break
            except InterruptedError:
                continue
            except OSError:
                break
        os.killpg(0, signal.SIGKILL)

    threading.Thread(target=watch, name="envcheck-lifeline", daemon=True).start()


def resolve(ref: str) -> Any:
    """The object named by a `module:qualname` reference."""
    module, _, qualname = ref.partition(":")
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def resolve_spec(request: dict[str, Any]) -> CheckSpec:
    """The spec a `check` request describes: its function by `module:qualname`, its needs as sent."""
    return CheckSpec(
        request["name"], resolve(request["func"]), "isolated", needs=Needs(**request.get("needs", {}))
    )


def _hook(request: dict[str, Any], name: str) -> Any:
    ref = (request.get("hooks") or {}).get(name)
    return resolve(ref) if ref else None


class ImportWatch:
    """The module loads attempted in this process while a check runs (the interpreter's `import` audit event), to
    tell afterwards which of them failed: found on the path, yet not in sys.modules. A module whose initialisation
    failed leaves this process half-changed (its submodules imported, its registrations in other modules made),
    and importing it again here fails differently ("Artifact of type=precompile already registered in mega-cache
    artifact factory" after a first `import torch._dynamo` met a read-only temp dir), hiding the cause."""

    def __init__(self) -> None:
        self.attempted: set[str] | None = None
        sys.addaudithook(self._hook)  # for the life of this process: a worker never runs anything else

    def _hook(self, event: str, args: tuple[Any, ...]) -> None:
        if event == "import" and self.attempted is not None:
            self.attempted.add(str(args[0]))

    def start(self) -> None:
        """Record from now on."""
        self.attempted = set()

    def failures(self) -> list[str]:
        """Stop recording; the modules whose import failed since `start` (a module absent from the path, an
        optional import, is no failure)."""
        attempted, self.attempted = self.attempted or set(), None
        failed = []
        for name in sorted(attempted):
            parent = name.rpartition(".")[0]
            if name in sys.modules or (parent and parent not in sys.modules):  # a parent that failed is named
                continue
            try:
                found = importlib.util.find_spec(name) is not None  # its parent is imported: nothing runs
            except (ImportError, ValueError):
                found = False
            if found and not _optional_probe(name):
                failed.append(name)
        return failed


# Modules torch imports only to find out whether an optional package is there: each fails at its first line when the
# package is absent, before it changes anything, and torch goes on without it. Such a failure is no half-changed
# process: counting it replaced the compile worker after every compile check (torch.compile imports the optree-backed
# pytree), so each one paid Dynamo's import and Inductor's ISA probes again (on the H100 proof's torch 2.11, six probes
# each importing torch: compile.cpu_isa 49-61 s after compile.inductor).
OPTIONAL_PROBES = {"torch.utils._cxx_pytree": "optree"}


def _optional_probe(name: str) -> bool:
    """Whether the failed import of `name` is one of OPTIONAL_PROBES with its package really absent."""
    package = OPTIONAL_PROBES.get(name)
    if package is None:
        return False
    try:
        return importlib.util.find_spec(package) is None
    except (ImportError, ValueError):
        return True


_watch: list[ImportWatch] = []  # this process's one watch, made at its first check


def import_watch() -> ImportWatch:
    """This process's ImportWatch (one audit hook, however many checks run here)."""
    if not _watch:
        _watch.append(ImportWatch())
    return _watch[0]


_saved: list[Saved] = []  # this process's global state as it was before its first check


def saved_state() -> Saved:
    """The process-global state (envcheck.core.isolation.process_state) as this worker found it before its first
    check: every check starts from it, whatever ran before it here."""
    if not _saved:
        _saved.append(Saved.take())
    return _saved[0]


def _handle(request: dict[str, Any]) -> dict[str, Any]:
    op = request.get("op")
    if op == Op.CHECK:
        spec = resolve_spec(request)
        saved = saved_state()
        watch = import_watch()
        watch.start()
        outcome = run_check(spec, Context.from_dict(request["context"]), _hook(request, "diagnose"))
        moved, stuck = saved.put_back()  # the next check starts from the state this worker started with
        result = outcome.result
        # A check that raised, or whose imports failed (even one it caught), may have left this process
        # half-changed (an operator half-registered, a module half-imported): the next check gets a fresh worker,
        # and there meets the cause itself. Beyond that the check layer's policy decides (a sticky CUDA error
        # poisons the context, so every later CUDA call here would fail too).
        recycle = _hook(request, "recycle")
        text = f"{result.summary}\n{result.reason or ''}\n{result.details}"
        replace = (
            outcome.raised
            or bool(watch.failures())
            or bool(stuck)  # state that could not be put back (a context left open): a fresh fork has none
            or result.restart_worker
            or bool(recycle and recycle(text))
        )
        return {
            "result": jsonable(result.to_dict()),
            "recycle": replace,
            "state": {"put_back": moved, "stuck": stuck},
        }
    if op == Op.FACTS:
        return {"facts": jsonable(resolve(request["func"])())}
    if op == Op.PING:
        return {"pong": os.getpid()}
    raise ValueError(f"unknown op {op!r}")


def serve(requests: int, replies: int) -> None:
    """Answer requests until the request pipe closes."""
    with os.fdopen(requests, "r", encoding="utf-8") as rin, os.fdopen(replies, "w", encoding="utf-8") as rout:
        for line in rin:
            if not line.strip():
                continue
            reply = _handle(json.loads(line))
            rout.write(json.dumps(reply) + "\n")
            rout.flush()


def run_forked(
    requests: int, replies: int, log: int, lifeline: int, server_pid: int, run_dir: str | None = None
) -> None:
    """Entry of a freshly forked worker (called in the child, never returns); its temp dir is its own part of
    `run_dir` (see `envcheck.core.rundir`)."""
    code = 0
    try:
        os.setsid()  # its own process group: a timeout kills the check and everything it started
        die_with_parent()
        if os.getppid() != server_pid:  # the server died before the watchdog was armed
            os._exit(0)
        for sig in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        signal.set_wakeup_fd(-1)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        for fd in (requests, replies, lifeline):  # the check's own subprocesses must not hold them
            os.set_inheritable(fd, False)
        watch_lifeline(lifeline)
        rundir.enter(run_dir)
        serve(requests, replies)
    except BaseException:  # report it in the log, then leave without running the server's atexit hooks
        import traceback

        traceback.print_exc()
        code = 70
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)
