"""The burn's worker processes: started (forked from a coordinator that holds torch but no CUDA state, or spawned as
`python -m envcheck.burn.loop`), each in a session of its own (the terminal's Ctrl-C reaches the coordinator only,
which stops them in order), with a lifeline on stdin, a record pipe, and a log file for stdout and stderr.
Killing one kills its whole session."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

LOG_TAIL = 3000


def prime_fork() -> None:
    """Before forking CPU workers: import what each would import, so the children inherit it instead of paying it
    out of their budget."""
    import torch.distributed
    import torch.nn.functional  # noqa: F401


class WorkerProcess:
    """One running worker: its pid, its lifeline (`stop`), the read end of its records, its log."""

    def __init__(
        self,
        index: int,
        config: dict[str, Any],
        folder: Path,
        fork: bool,
        env: dict[str, str],
        others: tuple[int, ...] = (),
    ):
        """Start worker `index`; `others`: the coordinator's ends of the earlier workers' pipes (a forked child
        closes them, so each lifeline ends when the coordinator's end closes)."""
        self.index = index
        self._popen: subprocess.Popen[bytes] | None = None
        self.log = folder / f"worker{index}.log"
        self.returncode: int | None = None
        read_out, write_out = os.pipe()
        read_in, write_in = os.pipe()
        config = {**config, "out_fd": write_out}
        log_fd = os.open(self.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            if fork:
                self.pid = self._fork(config, read_in, log_fd, env, (read_out, write_in, *others))
            else:
                self._popen = subprocess.Popen(
                    [sys.executable, "-m", "envcheck.burn.loop", json.dumps(config)],
                    stdin=read_in,
                    stdout=log_fd,
                    stderr=log_fd,
                    pass_fds=(write_out,),
                    start_new_session=True,
                    env=env,
                )
                self.pid = self._popen.pid
        finally:
            for fd in (read_in, write_out, log_fd):
                os.close(fd)
        self.records = read_out
        self.lifeline: int | None = write_in
        os.set_blocking(read_out, False)

    @staticmethod
    def _fork(
        config: dict[str, Any], stdin: int, log: int, env: dict[str, str], close: tuple[int, ...]
    ) -> int:
        pid = os.fork()
        if pid:
            return pid
        code = 70
        try:  # the child: a session of its own, the default signal handlers, its own streams; never returns
            os.setsid()
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                signal.signal(sig, signal.SIG_DFL)
            for fd in close:
                try:
                    os.close(fd)
                except OSError:
                    pass
            os.dup2(stdin, 0)
            os.dup2(log, 1)
            os.dup2(log, 2)
            # the parent's stream objects may not write to fds 1 and 2 (a test runner's capture): the log's do
            sys.stdout = open(1, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)
            sys.stderr = open(2, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)
            os.environ.clear()
            os.environ.update(env)
            from envcheck.burn import loop

            code = loop.main([json.dumps(config)])
        finally:
            os._exit(code)

    def poll(self) -> int | None:
        """The exit status once it ended (negative: the signal that killed it), else None."""
        if self._popen is not None:
            self.returncode = self._popen.poll()
        elif self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                self.returncode = -1
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def stop(self) -> None:
        """Ask it to stop after its round (and close the lifeline, which also stops it)."""
        if self.lifeline is None:
            return
        try:
            os.write(self.lifeline, b"stop\n")
        except OSError:
            pass
        os.close(self.lifeline)
        self.lifeline = None

    def kill(self) -> None:
        """SIGKILL its session, then reap it."""
        if self.poll() is None:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            if self._popen is not None:
                self.returncode = self._popen.wait()
                return
            try:
                _, status = os.waitpid(self.pid, 0)
                self.returncode = os.waitstatus_to_exitcode(status)
            except ChildProcessError:
                self.returncode = -int(signal.SIGKILL)

    def close(self) -> None:
        """Close the coordinator's ends."""
        self.stop()
        if self.records >= 0:
            os.close(self.records)
            self.records = -1

    def log_tail(self) -> str:
        """The last part of its log."""
        try:
            return self.log.read_bytes()[-LOG_TAIL:].decode(errors="replace")
        except OSError:
            return ""

    @property
    def ends(self) -> tuple[int, ...]:
        """The coordinator's open ends of this worker's pipes."""
        return tuple(fd for fd in (self.records, self.lifeline) if fd is not None and fd >= 0)
