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
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster import multinode
from tests.cluster.multinode import MultiCluster
from tests.helpers.slurm import (
    ROOT,
    SEARCH_PATH,
    START_TIMEOUT_S,
    Cluster,
    multinode_missing,
    require_slurm,
    slurm_config,
    stop_all,
)


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("slurm") is not None:
        require_slurm()


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
        (d / "slurm.conf").write_text(slurm_config(d, node))
        cluster.set_prolog("exit 0")
        cluster.set_prolog("exit 0", kind="epilog")
        log = (d / "log" / "daemons.out").open("ab")
        m = d / "munge"
        cluster.procs.append(
            subprocess.Popen(
                [
                    "munged",
                    "-F",
                    "--force",
                    f"--key-file={key}",
                    f"--socket={m}/socket",
                    f"--pid-file={m}/pid",
                    f"--log-file={m}/log",
                    f"--seed-file={m}/seed",
                ],
                stdout=log,
                stderr=log,
                env=env,
            )
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (m / "socket").exists():
            if cluster.procs[0].poll() is not None or time.monotonic() > deadline:
                pytest.fail(
                    f"munged did not start: {(m / 'log').read_text() if (m / 'log').exists() else ''}"
                )
            time.sleep(0.05)
        for cmd in (["slurmctld", "-D", "-i"], ["slurmd", "-D"]):
            cluster.procs.append(subprocess.Popen(cmd, stdout=log, stderr=log, env=env))
        cluster.wait_state("idle")
        cluster.started_in_s = time.monotonic() - began
        print(f"\none-node Slurm up in {cluster.started_in_s:.1f}s", file=sys.stderr)
        yield cluster
    finally:
        stop_all(cluster.procs)
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
