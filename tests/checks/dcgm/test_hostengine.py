"""dcgmi's connection error read beside the node's own evidence of nv-hostengine, for both DCGM checks.

Staged: dcgmi (tests/staging/dcgmi.py), answering as dcgmi/Command.cpp words a host engine that does not answer
("Error: unable to establish a connection to the specified host: localhost" / "Error: Unable to connect to host
engine. Host engine connection invalid/disconnected.", exit -21 & 0xff). Real: the processes (a process whose argv[0]
is nv-hostengine, as the daemon's is), this machine's host PID namespace (kthreadd visible), and a new PID namespace
with its own /proc (`unshare --pid --fork --mount-proc`), as a container has.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from envcheck.checks.dcgm import dcgm_diag, dcgm_health
from envcheck.cluster.mode_names import ModeName
from envcheck.cluster.policy import OK, decide
from envcheck.core.check import Context
from envcheck.core.result import Result, Status
from envcheck.probe.daemons import processes
from envcheck.probe.gpu_access import host_pid_namespace
from tests.checks.dcgm import health_documents as h
from tests.staging import dcgmi

# Each verdict here rests on which nv-hostengine processes the host runs; tests/checks/dcgm/conftest.py starts one.
pytestmark = pytest.mark.host

ROOT = Path(__file__).resolve().parents[3]
CHECKS = {"dcgm.health": dcgm_health, "dcgm.diag": dcgm_diag}
ANSWERS: dict[str, tuple[int, str] | str] = {
    "health -g g -c -j": (h.NO_ENGINE_RC, h.NO_ENGINE),
    "diag -r 1 -j": (h.NO_ENGINE_RC, h.NO_ENGINE),
}


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "bin"
    dcgmi.install(folder, ANSWERS)
    monkeypatch.setenv("PATH", f"{folder}:/usr/bin:/bin")
    return folder


def run(name: str) -> Result:
    return CHECKS[name](Context(deadline=time.monotonic() + 20)).named(name, 0.0)


@pytest.mark.parametrize("name", list(CHECKS))
def test_no_hostengine_process_among_the_hosts_is_not_running(bin_dir: Path, name: str) -> None:
    assert host_pid_namespace() and not processes(("nv-hostengine",))  # the evidence this case rests on
    result = run(name)
    assert result.status is Status.ERROR and result.fault_class is None
    assert result.code == "dcgm.hostengine_down"
    assert (
        "nv-hostengine is not running (no nv-hostengine process among the host's processes)" in result.summary
    )
    assert result.measured["hostengine"]["pids"] == []
    assert decide([result], ModeName.PROLOG).code is OK


@pytest.mark.parametrize("name", list(CHECKS))
def test_a_running_hostengine_that_does_not_answer_is_not_called_down(
    bin_dir: Path, hostengine: int, name: str
) -> None:
    """The case the old text got wrong: dcgmi cannot connect, yet the daemon's process is there."""
    result = run(name)
    assert result.code == "dcgm.hostengine_unreachable" and result.fault_class is None
    assert (
        f"nv-hostengine is running (pid {hostengine}) but does not answer dcgmi at localhost"
        in result.summary
    )
    assert "not running" not in result.summary
    assert result.measured["hostengine"]["tasks"][str(hostengine)]["state"] == "S"


CHILD = """
import json, time
from envcheck.checks.dcgm import {fn}

r = {fn}(__import__("envcheck.core.check", fromlist=["Context"]).Context(deadline=time.monotonic() + 20))
print(json.dumps({{"code": r.code, "summary": r.summary, "pids": r.measured["hostengine"]["pids"]}}))
"""


@pytest.mark.parametrize("fn", ["dcgm_health", "dcgm_diag"])
def test_in_a_pid_namespace_of_its_own_the_hostengine_cannot_be_seen(
    bin_dir: Path, hostengine: int, fn: str
) -> None:
    """A container's view: the host's nv-hostengine runs, but no process of it is visible; nothing is claimed."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("a new PID namespace needs root and unshare(1)")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", CHILD.format(fn=fn)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["code"] == "dcgm.hostengine_unreachable" and got["pids"] is None, got
    assert "whether nv-hostengine runs cannot be seen from this PID namespace" in got["summary"], got


@pytest.mark.parametrize("name", list(CHECKS))
def test_a_hang_carries_the_hostengines_own_state(bin_dir: Path, hostengine: int, name: str) -> None:
    dcgmi.install(bin_dir, {"health -g g -c -j": dcgmi.HANG, "diag -r 1 -j": dcgmi.HANG})
    result = CHECKS[name](Context(deadline=time.monotonic() + 4.0))
    assert result.code == "dcgm.hostengine_hang" and result.status is Status.FAIL
    assert f"nv-hostengine is not answering (nv-hostengine pid {hostengine} sleeping" in result.summary
    assert result.measured["hostengine"]["tasks"][str(hostengine)]["state"] == "S"


@pytest.mark.parametrize("name", list(CHECKS))
def test_a_hang_with_no_hostengine_process_is_dcgmis_own(bin_dir: Path, name: str) -> None:
    """The two sources disagree (dcgmi waits on a host engine; none runs among the host's processes): the process
    list, the direct one, is followed, and the node is not failed for a daemon that is not there."""
    assert host_pid_namespace() and not processes(("nv-hostengine",))
    dcgmi.install(bin_dir, {"health -g g -c -j": dcgmi.HANG, "diag -r 1 -j": dcgmi.HANG})
    result = CHECKS[name](Context(deadline=time.monotonic() + 4.0))
    assert (
        result.status is Status.ERROR and result.fault_class is None and result.code == "dcgm.hostengine_down"
    )
    assert "did not return within" in result.summary and "no nv-hostengine process runs" in result.summary
