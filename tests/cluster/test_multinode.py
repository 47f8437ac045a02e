"""envcheck across real Slurm nodes: every node a slurmd in its own namespaces (tests/cluster/multinode.py).

Real here: slurmctld, one slurmd per node, srun, the prolog, torchrun's c10d rendezvous, gloo over veth links
between network namespaces. Simulated: nothing (no GPU is involved: --allow-cpu, gloo).
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path

import pytest

from tests.cluster.multinode import MultiCluster
from tests.helpers.slurm import ROOT
from tests.staging import host_root

pytestmark = [pytest.mark.slurm, pytest.mark.slow]
TORCHRUN = str(Path(sys.executable).with_name("torchrun"))


def link_bytes(cluster: MultiCluster, node: str) -> int:
    """Bytes through node's eth0 so far (read inside the node's own namespace)."""
    out = cluster.in_node(node, "ip", "-s", "-j", "link", "show", "eth0").stdout
    stats = json.loads(out)[0]["stats64"]
    return int(stats["rx"]["bytes"]) + int(stats["tx"]["bytes"])


def dist_report(
    cluster: MultiCluster, tmp_path: Path, *srun: str, timeout: float = 120
) -> dict[str, dict[str, object]]:
    report = tmp_path / "dist.json"
    done = cluster.run(
        "srun",
        *srun,
        sys.executable,
        "-m",
        "envcheck.distributed",
        "--allow-cpu",
        "--timeout",
        "60",
        "--json",
        str(report),
        timeout=timeout,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return {r["name"]: r for r in json.loads(report.read_text())["results"]}


def test_srun_two_nodes_runs_the_checks_across_the_link(two_nodes: MultiCluster, tmp_path: Path) -> None:
    before = link_bytes(two_nodes, "n2")
    results = dist_report(two_nodes, tmp_path, "-N", "2", "-n", "4")
    assert results["dist.all_reduce"]["status"] == "pass"
    assert results["dist.all_reduce"]["measured"]["world_size"] == 4  # type: ignore[index]
    assert results["dist.collectives"]["status"] == "pass"
    # the healthy twin of every cross-node cause in the default shape: the look, the roll call and the transport
    # probe claim nothing, and the probe's figures are in the report
    assert "dist.rendezvous" not in results and results["dist.transport"]["status"] == "pass", results
    assert results["dist.transport"]["measured"]["links"][0]["ok"], results["dist.transport"]
    crossed = link_bytes(two_nodes, "n2") - before
    assert crossed > 1 << 20, f"only {crossed} bytes crossed n2's link: the ranks did not talk across nodes"


def test_srun_three_nodes(three_nodes: MultiCluster, tmp_path: Path) -> None:
    before = {n: link_bytes(three_nodes, n) for n in three_nodes.nodes}
    results = dist_report(three_nodes, tmp_path, "-N", "3", "-n", "3")
    assert results["dist.all_reduce"]["status"] == "pass"
    assert results["dist.all_reduce"]["measured"]["world_size"] == 3  # type: ignore[index]
    assert results["dist.collectives"]["status"] == "pass"
    for node in three_nodes.nodes:
        assert link_bytes(three_nodes, node) - before[node] > 1 << 19, f"{node}'s link carried no collective"


def test_torchrun_c10d_rendezvous_across_nodes(two_nodes: MultiCluster, tmp_path: Path) -> None:
    # One torchrun agent per node (srun --ntasks-per-node 1), rendezvous at n1's c10d store: the sbatch example.
    report = tmp_path / "dist.json"
    done = two_nodes.run(
        "srun",
        "-N",
        "2",
        "--ntasks-per-node",
        "1",
        TORCHRUN,
        "--nnodes",
        "2",
        "--nproc-per-node",
        "2",
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        "n1:29400",
        "--rdzv-id",
        "envcheck-test",
        "-m",
        "envcheck.distributed",
        "--allow-cpu",
        "--timeout",
        "60",
        "--json",
        str(report),
        timeout=150,
        env={
            "TMPDIR": str(tmp_path)
        },  # torchrun's agent leaves a $TMPDIR/torchelastic_* tree and never removes it
    )
    assert done.returncode == 0, done.stdout + done.stderr
    results = {r["name"]: r for r in json.loads(report.read_text())["results"]}
    assert results["dist.all_reduce"]["status"] == "pass"
    assert results["dist.all_reduce"]["measured"]["world_size"] == 4


def prolog(*args: str) -> str:
    """A prolog body running `envcheck run --for prolog ARGS` from this checkout (the prolog's PATH is bare), as on
    the host: where this machine is itself a container, without its mark (tests/staging/host_root.py)."""
    cmd = host_root.shell(str(ROOT), [sys.executable, "-m", "envcheck", "run", "--for", "prolog", *args])
    # each node keeps its prolog verdict in its own state file under the test's folder, never in /var/lib
    state = '"$ENVCHECK_TEST_DIR/prolog-$SLURMD_NODENAME.json"'
    return (
        f'echo "prolog on $(hostname)"\ncd {shlex.quote(str(ROOT))} && PYTHONPATH={shlex.quote(str(ROOT))} '
        f"ENVCHECK_SLURM_STATE={state} {cmd}"
    )


def test_prolog_runs_on_every_node(three_nodes: MultiCluster) -> None:
    three_nodes.set_prolog(prolog("--allow-cpu", "--only", "container.shm"))
    done = three_nodes.run("srun", "-N", "3", "hostname")
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.split()) == ["n1", "n2", "n3"]
    for node in three_nodes.nodes:  # each slurmd ran it, in its own UTS namespace
        assert f"prolog on {node}" in (three_nodes.dir / f"prolog-{node}.log").read_text()


def test_node_fault_drains_only_that_node_and_the_job_runs_on_the_others(three_nodes: MultiCluster) -> None:
    # n2 must have a GPU it lacks (a node fault); n1 and n3 expect none. No GPU exists here: the fault is real.
    three_nodes.set_prolog(
        'if [ "$SLURMD_NODENAME" = n2 ]; then set -- --expect-gpus 1; else set -- --allow-cpu; fi\n'
        + prolog("--only", "cuda.available")
        + ' "$@"'
    )
    first = three_nodes.run("srun", "-N", "3", "hostname")
    assert first.returncode != 0 and "prolog" in first.stderr.lower(), first.stdout + first.stderr
    deadline = time.monotonic() + 15
    while "drain" not in three_nodes.states().get("n2", "") and time.monotonic() < deadline:
        time.sleep(0.2)
    three_nodes.wait_states({"n1": "idle", "n3": "idle"}, timeout=15)  # after "completing" the failed job
    states = three_nodes.states()
    assert states["n2"] in ("drained", "draining", "drain"), states
    reasons = three_nodes.reasons()
    assert list(reasons) == ["n2"], reasons
    assert reasons["n2"] == "Prolog error", reasons  # the prolog calls no scontrol (Slurm's prolog guide)
    kept = json.loads((three_nodes.dir / "prolog-n2.json").read_text())["reason"]  # for the health check
    assert kept.startswith("[node] cuda.available:") and "no NVIDIA driver is loaded on this host" in kept, (
        kept
    )
    full = three_nodes.run("srun", "-N", "3", "--immediate=5", "hostname")  # 3 nodes no longer exist for it
    assert full.returncode != 0
    after = three_nodes.run("srun", "-N", "2", "hostname", timeout=60)
    assert after.returncode == 0, after.stderr
    assert sorted(after.stdout.split()) == ["n1", "n3"]
