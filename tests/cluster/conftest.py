"""A real one-node Slurm (munged, slurmctld, slurmd on localhost) for the `slurm` tests.

Session-scoped: started once (about a second), torn down at the end with no process or folder left.
Tests switch the node's Prolog by rewriting the prolog script (`cluster.set_prolog`). Where slurm-wlm
or munge is missing, or we are not root, the tests skip with the reason; ENVCHECK_REQUIRE_SLURM=1 (CI)
makes that a failure.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.cluster import multinode
from tests.cluster.multinode import MultiCluster
from tests.cluster.slurm_conf import common_lines

ROOT = Path(__file__).resolve().parents[2]
BINARIES = ("munged", "slurmctld", "slurmd", "srun", "sinfo", "scontrol")
START_TIMEOUT_S = 60.0
SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])  # the daemons live in sbin


def slurm_missing() -> str | None:
    missing = [b for b in BINARIES if shutil.which(b, path=SEARCH_PATH) is None]
    if missing:
        return f"{', '.join(missing)} not found: apt-get install slurm-wlm munge (or run .ci/run)"
    if os.geteuid() != 0:
        return "the one-node Slurm runs slurmd as root; run the tests as root"
    return None


def require_slurm() -> None:
    why = slurm_missing()
    if why:
        if os.environ.get("ENVCHECK_REQUIRE_SLURM") == "1":
            pytest.fail(f"slurm test cannot run and ENVCHECK_REQUIRE_SLURM=1: {why}")
        pytest.skip(why)


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("slurm") is not None:
        require_slurm()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Cluster:
    """What the tests need: the node's name, the environment for srun/sinfo, and the prolog switch."""

    dir: Path
    node: str
    env: dict[str, str]
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    started_in_s: float = 0.0

    def set_prolog(self, body: str, kind: str = "prolog") -> None:
        """Replace the Prolog (or, kind="epilog", the Epilog) script, atomically: slurmd may be reading it."""
        tmp = self.dir / f"{kind}.sh.tmp"
        tmp.write_text(f"#!/bin/sh\nexec >>{self.dir}/{kind}.log 2>&1\n"  # verdicts stay in the test's folder
                       f"export ENVCHECK_SLURM_STATE={self.dir}/slurm-prolog.json\n{body}\n")
        tmp.chmod(0o755)
        tmp.replace(self.dir / f"{kind}.sh")

    def run(self, *cmd: str, timeout: float = 60, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(cmd), env={**self.env, **(env or {})}, capture_output=True, text=True,
                              timeout=timeout, check=False)

    def state(self) -> str:
        return self.run("sinfo", "-h", "-n", self.node, "-o", "%T").stdout.strip()

    def reason(self) -> str:
        return self.run("sinfo", "-R", "-h", "-o", "%E").stdout.strip()

    def wait_state(self, want: str, timeout: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while (got := self.state()) != want:
            if time.monotonic() > deadline:
                raise AssertionError(f"node {self.node} is {got!r}, not {want!r}, after {timeout:g}s; "
                                     f"logs in {self.dir}/log")
            time.sleep(0.2)

    def resume(self) -> None:
        """Undo a drain so the next test starts from an idle node."""
        if self.state() != "idle":
            self.run("scontrol", "update", f"NodeName={self.node}", "State=RESUME")
            self.wait_state("idle")


def _config(d: Path, node: str) -> str:
    return f"""ClusterName=envcheck
SlurmctldHost={node}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
{common_lines(d)}Epilog={d}/epilog.sh
NodeName={node} NodeAddr=127.0.0.1 CPUs=2 RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes={node} Default=YES MaxTime=INFINITE State=UP
"""


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in reversed(procs):  # slurmd, slurmctld, then munged
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[Cluster]:
    require_slurm()
    began = time.monotonic()
    d = Path(tempfile.mkdtemp(prefix="envcheck-slurm-"))
    node = socket.gethostname().split(".")[0]
    env = {**os.environ, "SLURM_CONF": str(d / "slurm.conf"), "PYTHONPATH": str(ROOT), "PATH": SEARCH_PATH}
    cluster = Cluster(d, node, env)
    try:
        for sub in ("state", "spool", "log", "munge"):
            (d / sub).mkdir(mode=0o700)
        key = d / "munge" / "munge.key"
        key.write_bytes(secrets.token_bytes(1024))
        key.chmod(0o600)
        (d / "slurm.conf").write_text(_config(d, node))
        cluster.set_prolog("exit 0")
        cluster.set_prolog("exit 0", kind="epilog")
        log = (d / "log" / "daemons.out").open("ab")
        m = d / "munge"
        cluster.procs.append(subprocess.Popen(
            ["munged", "-F", "--force", f"--key-file={key}", f"--socket={m}/socket", f"--pid-file={m}/pid",
             f"--log-file={m}/log", f"--seed-file={m}/seed"], stdout=log, stderr=log, env=env))
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (m / "socket").exists():
            if cluster.procs[0].poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"munged did not start: {(m / 'log').read_text() if (m / 'log').exists() else ''}")
            time.sleep(0.05)
        for cmd in (["slurmctld", "-D", "-i"], ["slurmd", "-D"]):
            cluster.procs.append(subprocess.Popen(cmd, stdout=log, stderr=log, env=env))
        cluster.wait_state("idle")
        cluster.started_in_s = time.monotonic() - began
        print(f"\none-node Slurm up in {cluster.started_in_s:.1f}s", file=sys.stderr)
        yield cluster
    finally:
        _stop(cluster.procs)
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def cluster(slurm_cluster: Cluster) -> Iterator[Cluster]:
    """The session's cluster, with a no-op prolog and epilog and an idle node before and after the test."""
    for kind in ("prolog", "epilog"):
        slurm_cluster.set_prolog("exit 0", kind=kind)
    slurm_cluster.resume()
    yield slurm_cluster
    for kind in ("prolog", "epilog"):
        slurm_cluster.set_prolog("exit 0", kind=kind)
    slurm_cluster.resume()


MULTI_BINARIES = ("ip", "nsenter", "unshare", "tc")


def multinode_missing() -> str | None:
    """Why the multi-node Slurm cannot start here (None when it can)."""
    why = slurm_missing()
    missing = [b for b in MULTI_BINARIES if shutil.which(b, path=SEARCH_PATH) is None]
    if why is None and missing:
        why = f"{', '.join(missing)} not found: apt-get install iproute2 util-linux (or run .ci/run)"
    if why is None and subprocess.run(["ip", "netns", "list"], capture_output=True, timeout=10).returncode != 0:
        why = "`ip netns` does not work here (no network namespaces: a container without CAP_SYS_ADMIN?)"
    return why


def _multinode(size: int) -> Iterator[MultiCluster]:
    why = multinode_missing()
    if why:
        if os.environ.get("ENVCHECK_REQUIRE_SLURM") == "1":
            pytest.fail(f"multi-node slurm test cannot run and ENVCHECK_REQUIRE_SLURM=1: {why}")
        pytest.skip(why)
    d = Path(tempfile.mkdtemp(prefix=f"envcheck-slurm{size}n-"))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATH": SEARCH_PATH}
    cluster: MultiCluster | None = None
    try:
        cluster = multinode.start(d, size, env)
        print(f"\n{size}-node Slurm up in {cluster.started_in_s:.1f}s", file=sys.stderr)
        yield cluster
    finally:
        if cluster is not None:
            multinode.stop(cluster)
            left = multinode.leftovers(cluster)
            assert not left, f"the {size}-node Slurm left {left}"
        else:
            shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def slurm_2nodes() -> Iterator[MultiCluster]:
    """A real 2-node Slurm (tests/cluster/multinode.py), started once per session."""
    yield from _multinode(2)


@pytest.fixture(scope="session")
def slurm_3nodes() -> Iterator[MultiCluster]:
    """A real 3-node Slurm, started once per session."""
    yield from _multinode(3)


def _fresh(cluster: MultiCluster) -> Iterator[MultiCluster]:
    cluster.set_prolog("exit 0")
    for node in ("ctl", *cluster.nodes):
        cluster.write_hosts(node)
    cluster.resume_all()
    yield cluster
    cluster.set_prolog("exit 0")
    for node in ("ctl", *cluster.nodes):
        cluster.write_hosts(node)
    cluster.resume_all()


@pytest.fixture
def two_nodes(slurm_2nodes: MultiCluster) -> Iterator[MultiCluster]:
    """The 2-node cluster with a no-op prolog, full /etc/hosts and idle nodes before and after the test."""
    yield from _fresh(slurm_2nodes)


@pytest.fixture
def three_nodes(slurm_3nodes: MultiCluster) -> Iterator[MultiCluster]:
    """The 3-node cluster, reset as `two_nodes` is."""
    yield from _fresh(slurm_3nodes)


@pytest.fixture(scope="session")
def slurm_5nodes() -> Iterator[MultiCluster]:
    """A real 5-node Slurm (a fleet: a median and a spread need more than three nodes), started once per session."""
    yield from _multinode(5)


@pytest.fixture
def five_nodes(slurm_5nodes: MultiCluster) -> Iterator[MultiCluster]:
    """The 5-node cluster, reset as `two_nodes` is."""
    yield from _fresh(slurm_5nodes)
