"""The launcher's /tmp/envcheck-dist-* work directories never outlive their launch."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from envcheck.collectives import launch as launch_mod
from envcheck.collectives import workdirs


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_stale_workdirs_of_dead_launches_are_swept(tmp_path: Path) -> None:
    dead = tmp_path / f"envcheck-dist-{_dead_pid()}-abc"
    live = tmp_path / f"envcheck-dist-{os.getppid()}-def"
    other = tmp_path / "envcheck-dist-notapid"
    for path in (dead, live, other):
        path.mkdir()
        (path / "rank0.log").write_text("x")
    assert workdirs.sweep_stale_workdirs(str(tmp_path)) == [str(dead)]
    assert not dead.exists() and live.exists() and other.exists()


@pytest.mark.parametrize(
    "exc", [BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable"), KeyboardInterrupt()]
)
def test_an_interrupted_launch_leaves_no_workdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exc: BaseException
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    def fail(*args: object, **kwargs: object) -> None:
        raise exc

    monkeypatch.setattr(launch_mod, "_fork_rank", fail)  # a fork failure, or Ctrl-C while starting ranks
    plan = launch_mod.LaunchPlan("gloo", 2, ("allreduce",), 10.0, start="fork")
    monkeypatch.setattr(launch_mod, "can_fork", lambda *a: True)
    with pytest.raises(BaseException):  # noqa: B017 - what matters is what is left behind
        launch_mod.launch(plan)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("envcheck-dist-")] == []
