"""Every way the rendezvous fails across nodes, built for real, named by its own cause and no other, within seconds
of being knowable; and healthy twins of the same shape that must not be blamed.

Real: the Slurm nodes (namespaces, tests/cluster/multinode.py), their /etc/hosts, iptables and tc in one node's
namespace, a process holding the port, a node-local environment (another envcheck, an interface variable, a wrapper
before envcheck), libfaketime shifting one node's wall clock, Slurm's own steps (srun --overlap) and clock (sdiag).
Nothing is simulated (no GPU is involved: --allow-cpu, gloo). Staging: tests/cluster/crossnode_faults.py.

Before this (measured here with the same stages, --timeout 12, load average 6-9 on 2 cores): MASTER_ADDR that
resolves nowhere, or to n2, or a firewall dropping the port on n1, all read "the rendezvous port 29561 on n1 is
taken ... (The client socket has timed out after 12000ms while trying to connect to (nosuchhost, 29561).)" after
34-39 s; the port really held left rank 1 hanging until killed; a rank that never started or exited early was
"never reached the rendezvous store within 12s" with no why; a skewed n1 blamed n2 ("n2's clock is 40.0s behind
n1's"); a stale /etc/hosts entry on n2 was only "rank 1 never arrived".
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import time
from pathlib import Path

import pytest

from envcheck.collectives.rollcall import EARLY_S, GATHER_S
from tests.cluster.crossnode_faults import (
    PORT,
    TIMEOUT_S,
    WALL_S,
    Run,
    healthy,
    holder,
    hosts_with,
    iptables,
    on,
    run_dist,
    the_cause,
    write_hosts,
)
from tests.cluster.multinode import MultiCluster
from tests.helpers.slurm import ROOT

pytestmark = [pytest.mark.slurm, pytest.mark.slow]
KNOWN_AT_ONCE_S = GATHER_S + 4.0  # a cause some rank sees alone: rank 0 stops within its gather window
SLURM_VIEW_S = EARLY_S + 6.0  # a cause Slurm's look on the rank's node settles, a few seconds after hosting
DEADLINE_S = TIMEOUT_S + 6.0  # a rank whose task has not started envcheck: only the deadline settles it
FAKETIME = shutil.which("faketime")


def documented_command() -> str:
    """docs/distributed.md's command for a multi-node run that does not start, as written."""
    text = (ROOT / "docs" / "distributed.md").read_text()
    (block,) = re.findall(r"### When a multi-node run does not start.*?\n```sh\n(.*?)\n```", text, flags=re.S)
    return block.strip()


def test_master_addr_that_resolves_nowhere(two_nodes: MultiCluster, tmp_path: Path) -> None:
    # The documented command, as written (`python` is this venv's), with the name an operator mistyped.
    command = documented_command()
    assert command.startswith("srun -N 2 ") and "--timeout 12 --json report.json" in command, command
    argv = command.split()
    argv[1:1] = [f"--chdir={tmp_path}"]
    began = time.monotonic()
    done = two_nodes.run(
        *argv,
        timeout=WALL_S,
        env={
            "PATH": f"{Path(sys.executable).parent}:{two_nodes.env['PATH']}",
            "MASTER_ADDR": "nosuchhost",
            "MASTER_PORT": PORT,
        },
    )
    results = {r["name"]: r for r in json.loads((tmp_path / "report.json").read_text())["results"]}
    run = Run(results, done.stdout + done.stderr, time.monotonic() - began, done.returncode)
    assert done.returncode != 0 and "Traceback" not in run.out, run.out
    cause = the_cause(run, "dist.rendezvous", "dist.rendezvous.unresolved")
    assert cause["fault_class"] == "node" and cause["measured"]["unresolved_on"] == ["n1", "n2"], cause
    assert cause["summary"].startswith("MASTER_ADDR 'nosuchhost' does not resolve on n1, n2"), cause
    assert "it resolves on no node" in cause["summary"] and "taken" not in cause["summary"]
    assert "rank 0 on n1: MASTER_ADDR 'nosuchhost' does not resolve on n1" in run.out  # its own line
    assert cause["duration_s"] <= KNOWN_AT_ONCE_S, cause


def test_rendezvous_name_missing_on_one_node(two_nodes: MultiCluster, tmp_path: Path) -> None:
    two_nodes.write_hosts("n2", drop=("n1",))
    run = run_dist(two_nodes, tmp_path)
    cause = the_cause(run, "dist.rendezvous", "dist.rendezvous.unresolved")
    assert cause["summary"].startswith("MASTER_ADDR 'n1' does not resolve on n2"), cause
    assert "it resolves on n1: 10.77.0.11" in cause["summary"], cause
    assert cause["measured"]["nodes"] == ["n2"]
    assert cause["duration_s"] <= TIMEOUT_S, cause


def test_rendezvous_name_stale_on_one_node(two_nodes: MultiCluster, tmp_path: Path) -> None:
    write_hosts(two_nodes, "n2", hosts_with(two_nodes, n1="10.77.0.99"))  # an old address of n1 on n2 only
    run = run_dist(two_nodes, tmp_path)
    cause = the_cause(run, "dist.rendezvous", "dist.rendezvous.unresolved")
    assert "resolves to a stale address on n2 (10.77.0.99), not to n1" in cause["summary"], cause
    assert cause["measured"]["nodes"] == ["n2"], cause
    assert cause["duration_s"] <= TIMEOUT_S, cause


def test_master_addr_naming_another_node(two_nodes: MultiCluster, tmp_path: Path) -> None:
    run = run_dist(two_nodes, tmp_path, env={"MASTER_ADDR": "n2"})  # rank 0 runs on n1
    cause = the_cause(run, "dist.rendezvous", "dist.rendezvous.master_elsewhere")
    assert cause["fault_class"] == "config", cause
    assert cause["summary"].startswith("MASTER_ADDR 'n2' resolves to 10.77.0.12 (n2 itself), not to n1"), (
        cause
    )
    assert "rank 1 on n2: MASTER_ADDR 'n2' resolves to" in run.out and "rank 0 runs on n1" in run.out
    assert cause["duration_s"] <= KNOWN_AT_ONCE_S, cause


def test_rendezvous_port_taken_on_the_first_node(two_nodes: MultiCluster, tmp_path: Path) -> None:
    # Without srun -K: the other rank, whose connection the holder accepts and never answers (c10d's client then
    # waits for its ping forever), must still say why and end (it hung until killed before). It ends twice the
    # timeout after it began, plus a margin: a short timeout keeps the test short (the cause needs no wait).
    with holder(two_nodes, "n1", PORT) as pid:
        run = run_dist(two_nodes, tmp_path, kill_on_bad_exit=False, timeout_s=6)
    cause = the_cause(run, "dist.rendezvous", "dist.rendezvous.port_taken")
    assert (
        "rank 1 on n2: n1:29561 (10.77.0.11) accepts connections but no c10d store answered there" in run.out
    )
    assert cause["fault_class"] == "config"
    assert cause["summary"].startswith(f"the rendezvous port {PORT} on n1 is already held by pid {pid} ("), (
        cause
    )
    assert f"kill {pid}" in cause["remediation"], cause
    assert cause["duration_s"] < 3, cause  # rank 0's own look: before any store


def test_a_firewall_on_the_first_node_drops_the_port(two_nodes: MultiCluster, tmp_path: Path) -> None:
    # Only what arrives on eth0: n1 itself still reaches its port, so only Slurm's look from n2 can tell.
    with iptables(two_nodes, "n1", ["-i", "eth0", "-p", "tcp", "--dport", PORT, "-j", "DROP"]):
        run = run_dist(two_nodes, tmp_path)
    cause = the_cause(run, "dist.rendezvous", "dist.rendezvous.port_blocked")
    assert cause["summary"].startswith(
        f"rank 1 (on n2) never reached the rendezvous store: n2 cannot connect to the rendezvous port {PORT} on n1"
    ), cause
    assert "10.77.0.11 answers on slurmd's port 6818" in cause["summary"], cause
    assert "rank 1 on n2: 10.77.0.11 answers on slurmd's port 6818 but drops connections to" in run.out
    assert cause["duration_s"] <= SLURM_VIEW_S, cause


def test_a_firewall_rejecting_the_port_even_from_the_node_itself(
    two_nodes: MultiCluster, tmp_path: Path
) -> None:
    with iptables(two_nodes, "n1", ["-p", "tcp", "--dport", PORT, "-j", "REJECT"]):
        run = run_dist(two_nodes, tmp_path)
    cause = the_cause(run, "dist.rendezvous", "dist.rendezvous.port_blocked")
    assert cause["summary"].startswith(f"port {PORT} on n1 accepts no connection even from n1 itself"), cause
    assert "connection refused" in cause["summary"], cause
    assert cause["duration_s"] < 3, cause


def test_interface_variable_naming_what_one_node_lacks(two_nodes: MultiCluster, tmp_path: Path) -> None:
    run = run_dist(two_nodes, tmp_path, on("n2", "export GLOO_SOCKET_IFNAME=ib0"))
    cause = the_cause(run, "dist.rendezvous", "dist.rendezvous.interface")
    assert cause["fault_class"] == "config" and cause["status"] == "fail"
    assert cause["summary"].startswith("GLOO_SOCKET_IFNAME=ib0 names no usable interface on n2"), cause
    assert "'ib0' does not exist" in cause["summary"] and "eth0" in cause["summary"]
    assert cause["duration_s"] <= TIMEOUT_S, cause


def test_nccl_variables_a_gloo_run_does_not_read_only_warn(two_nodes: MultiCluster, tmp_path: Path) -> None:
    # NCCL_SOCKET_IFNAME names an interface n2 lacks; NCCL_IB_HCA names an HCA on a node with none (NCCL would fall
    # back to sockets). gloo reads neither: the run passes, and says what an NCCL job on n2 will meet.
    run = run_dist(two_nodes, tmp_path, on("n2", "export NCCL_SOCKET_IFNAME=ib0 NCCL_IB_HCA=mlx5_0"))
    assert run.returncode == 0, run.out
    cause = the_cause(run, "dist.rendezvous", "dist.rendezvous.interface")
    assert cause["status"] == "warn" and cause["measured"]["nodes"] == ["n2"], cause
    assert "NCCL_SOCKET_IFNAME=ib0 on n2 selects nothing usable" in cause["summary"], cause
    assert "NCCL_IB_HCA=mlx5_0 but this host shows no InfiniBand devices" in cause["summary"], cause
    assert run.results["dist.all_reduce"]["status"] == "pass"


def test_envcheck_version_differs_on_one_node(two_nodes: MultiCluster, tmp_path: Path) -> None:
    other = tmp_path / "other-install"
    shutil.copytree(ROOT / "envcheck", other / "envcheck", ignore=shutil.ignore_patterns("__pycache__"))
    init = other / "envcheck" / "__init__.py"
    init.write_text(init.read_text().replace('__version__ = "', '__version__ = "9.9.9-other+'))
    run = run_dist(two_nodes, tmp_path, on("n2", f"export PYTHONPATH={other}; cd {other}"))
    cause = the_cause(run, "dist.rendezvous", "dist.rendezvous.versions")
    assert cause["fault_class"] == "image"
    assert cause["summary"].startswith("versions differ across nodes: envcheck "), cause
    assert "on n1" in cause["summary"] and "9.9.9-other+" in cause["summary"] and "on n2" in cause["summary"]


def test_a_rank_whose_task_never_starts_envcheck(two_nodes: MultiCluster, tmp_path: Path) -> None:
    # Rank 1's task hangs in what runs before envcheck (a stuck wrapper, a container pull): Slurm shows it running.
    run = run_dist(two_nodes, tmp_path, '[ "$SLURM_PROCID" = 1 ] && exec sleep 120')
    cause = the_cause(run, "dist.rendezvous", "dist.rendezvous.missing_rank")
    assert cause["summary"].startswith(f"rank 1 (on n2) never reached the rendezvous store n1:{PORT}"), cause
    assert "its task is running `sleep 120` (pid " in cause["summary"], cause
    assert cause["measured"]["nodes"] == ["n2"]
    assert cause["duration_s"] <= DEADLINE_S, cause


def test_a_rank_whose_task_ended_before_the_store(two_nodes: MultiCluster, tmp_path: Path) -> None:
    run = run_dist(two_nodes, tmp_path, '[ "$SLURM_PROCID" = 1 ] && exit 0')
    cause = the_cause(run, "dist.rendezvous", "dist.rendezvous.missing_rank")
    assert "Slurm's look on n2 finds no process of rank 1 in this step" in cause["summary"], cause
    assert cause["duration_s"] <= SLURM_VIEW_S, cause  # settled early: waiting would not bring it back


def test_a_rank_that_never_starts_is_named_with_its_node(three_nodes: MultiCluster, tmp_path: Path) -> None:
    # Block layout: ranks 0-1 on n1, 2-3 on n2, 4-5 on n3; rank 3 hangs before Python (a stuck NFS, a hung prolog).
    run = run_dist(three_nodes, tmp_path, '[ "$SLURM_PROCID" = 3 ] && exec sleep 60', "-N", "3", "-n", "6")
    cause = the_cause(run, "dist.rendezvous", "dist.rendezvous.missing_rank")
    assert cause["summary"].startswith("rank 3 (on n2) never reached the rendezvous store n1:"), cause


@pytest.mark.skipif(FAKETIME is None, reason="faketime not found: apt-get install faketime")
@pytest.mark.parametrize("node", ["n2", "n1"])
def test_a_node_clock_skewed_past_the_rendezvous_keep_alive(
    two_nodes: MultiCluster, tmp_path: Path, node: str
) -> None:
    # CLOCK_REALTIME has no namespace: libfaketime shifts the wall clock of one node's rank only. Judged against the
    # Slurm controller's clock (sdiag), so rank 0's own node (n1) is named when it is the skewed one. Its monotonic
    # clock shifts too (Debian's libfaketime 0.9.10 with FAKETIME_DONT_FAKE_MONOTONIC=1 fails every sleep).
    run = run_dist(two_nodes, tmp_path, on(node, 'WRAP="faketime -f +40s"'))
    cause = the_cause(run, "dist.rendezvous", "dist.rendezvous.clock_skew")
    assert cause["fault_class"] == "node" and cause["measured"]["nodes"] == [node], cause
    assert cause["summary"].startswith(f"{node}'s clock is "), cause
    assert "s ahead of the Slurm controller's" in cause["summary"], cause
    # sdiag's epoch has 1 s resolution: the skew lands within a second or so of the 40 s injected.
    assert 38.0 <= cause["measured"]["skew_s"][node] <= 42.0, cause


@pytest.mark.skipif(FAKETIME is None, reason="faketime not found: apt-get install faketime")
def test_healthy_twin_of_the_rendezvous_faults(two_nodes: MultiCluster, tmp_path: Path) -> None:
    """The same shapes, each short of a fault: the name set explicitly to rank 0's node, another port held on n1,
    a firewall on n1 that lets the job through, interface variables naming a real interface on both nodes, a clock
    a second off on n2, and a wrapper that runs briefly before envcheck on rank 1."""
    open_ports = [
        ["-i", "eth0", "-m", "state", "--state", "ESTABLISHED,RELATED", "-j", "ACCEPT"],
        ["-i", "eth0", "-p", "tcp", "--dport", PORT, "-j", "ACCEPT"],
        ["-i", "eth0", "-p", "tcp", "--dport", "6818", "-j", "ACCEPT"],  # slurmd
        ["-i", "eth0", "-p", "tcp", "--dport", "32768:60999", "-j", "ACCEPT"],  # ip_local_port_range
        ["-i", "eth0", "-p", "tcp", "-j", "DROP"],
    ]
    prelude = "\n".join(
        [
            "export GLOO_SOCKET_IFNAME=eth0 NCCL_SOCKET_IFNAME=eth0",
            on("n2", 'WRAP="faketime -f +1s"'),
            '[ "$SLURM_PROCID" = 1 ] && sleep 1',
        ]
    )
    with holder(two_nodes, "n1", str(int(PORT) + 1)), iptables(two_nodes, "n1", *open_ports):
        run = run_dist(two_nodes, tmp_path, prelude, env={"MASTER_ADDR": "n1"})
    healthy(run)
