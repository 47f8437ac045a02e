"""A process that cannot be started (fork fails under a low `ulimit -u`) is an `error` result naming
the cause, never a traceback or a dead fork server."""

from __future__ import annotations

import errno
import json
import os
import socket
import tempfile
from pathlib import Path

import pytest

from envcheck.core.check import CheckSpec, Context
from envcheck.core.errors import StartFailure, process_start_problem
from envcheck.core.execute import execute
from envcheck.core.isolation import forkserver
from envcheck.core.result import FaultClass, Status

EAGAIN = BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")


def test_the_cause_names_the_process_limit() -> None:
    assert process_start_problem(EAGAIN).startswith(
        "cannot start a process: the user's process limit is reached (ulimit -u"
    )


def test_fork_server_answers_a_failed_fork_with_the_cause(monkeypatch: pytest.MonkeyPatch) -> None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    life_r, life_w = os.pipe()
    server = forkserver.ForkLoop(theirs, life_r)
    fds = [os.pipe()[0] for _ in range(4)]
    monkeypatch.setattr(os, "fork", lambda: (_ for _ in ()).throw(EAGAIN))
    socket.send_fds(ours, [json.dumps({"op": "fork"}).encode()], fds)
    open_before = len(os.listdir("/proc/self/fd"))
    try:
        assert server.answer() is True  # today: BlockingIOError escapes and the fork server dies
        reply = json.loads(ours.recv(65536))
        assert "the user's process limit is reached" in reply["error"]
        assert len(os.listdir("/proc/self/fd")) == open_before  # the 4 received descriptors were closed
    finally:
        for fd in (life_r, life_w, server.wake_r, server.wake_w, *fds):
            os.close(fd)
        ours.close()
        theirs.close()


def test_a_launch_whose_rank_cannot_fork_is_an_error_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from envcheck.collectives import launch as launch_mod

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(launch_mod, "can_fork", lambda *a: True)
    monkeypatch.setattr(launch_mod, "_fork_rank", lambda *a, **k: (_ for _ in ()).throw(EAGAIN))
    plan = launch_mod.LaunchPlan("gloo", 2, ("allreduce",), 10.0, start="fork")
    spec = CheckSpec(name="dist.fake", func=lambda ctx: launch_mod.launch(plan), description="x")  # type: ignore[arg-type,return-value]
    result = execute(spec, Context())
    # the process limit is the container's configuration, never envcheck's crash nor the node's fault
    assert result.status is Status.FAIL and result.code == "runtime.nproc_low"
    assert result.fault_class is FaultClass.CONFIG
    assert result.summary.startswith(
        "rank 0 of 2: a process could not be started: the process/thread limit (nproc"
    )
    assert "crashed" not in result.summary and "Traceback" not in (result.details or "")
    assert list(tmp_path.iterdir()) == []


def test_start_failure_is_not_reported_as_a_crash() -> None:
    def check(ctx: Context) -> None:
        raise StartFailure("cannot start a process: the user's process limit is reached (ulimit -u: 10)")

    result = execute(CheckSpec(name="x.y", func=check, description="x"), Context())  # type: ignore[arg-type]
    assert result.status is Status.FAIL and result.code == "runtime.nproc_low"
    assert result.summary.startswith("a process could not be started: the process/thread limit")
