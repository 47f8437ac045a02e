"""The failures after the roll call, built for real: the store forms, every rank arrives, and the backend's own
connections between nodes cannot open (`dist.transport`), each named with its node, the address gloo took and why;
a slow link that still works is a figure and at most a warning naming the node. Healthy twins of each shape.

Real: gloo's own address choice on each node (its host name in that node's /etc/hosts, or GLOO_SOCKET_IFNAME), a
second network with a veth whose peer is down (the interface is up without carrier), iptables in n1's namespace,
a tc token bucket on n2's eth0 (this kernel has no netem). Simulated: nothing (no GPU: --allow-cpu, gloo).
gloo opens each pair's connection from the greater address (gloo/transport/tcp/device.cc, Device::isInitiator):
with these nodes on 10.77.0.x, a loopback address on one node is greater, so that node opens its connections and
gloo works; with loopback on both nodes (each resolving its own name to 127.0.1.1, Debian's default), the
connecting node reaches only itself.

Before this (measured here with the same stages, --timeout 12): loopback on both nodes was "gloo ranks did not all
finish: ... rank 0 raised in 'init': RuntimeError: Gloo connectFullMesh failed with ... timed out connecting:
SO_ERROR: Connection refused, remote=[127.0.1.1]" (no cause, no node); the interface without carrier and the
firewall on gloo's ports were "ranks 0, 1 stalled after 'init' (no progress for 12.1s)" after 25-28 s; the slow
link passed with no figure.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cluster.crossnode_faults import (
    PORT,
    cut_cable,
    healthy,
    hosts_with,
    iptables,
    run_dist,
    second_network,
    shaped,
    the_cause,
    write_hosts,
)
from tests.cluster.multinode import MultiCluster

pytestmark = [pytest.mark.slurm, pytest.mark.slow]
PROBE_S = 10.0  # the transport probe's verdict: two connect attempts of 2 s at most, then rank 0 judges


def test_both_host_names_resolving_to_loopback(two_nodes: MultiCluster, tmp_path: Path) -> None:
    write_hosts(two_nodes, "n1", hosts_with(two_nodes, n1="127.0.1.1"))
    write_hosts(two_nodes, "n2", hosts_with(two_nodes, n2="127.0.1.1"))
    run = run_dist(two_nodes, tmp_path, env={"MASTER_ADDR": "10.77.0.11"})
    cause = the_cause(run, "dist.transport", "dist.transport.loopback")
    assert cause["status"] == "fail" and sorted(cause["measured"]["nodes"]) == ["n1", "n2"], cause
    assert "is a loopback address (n1's is 127.0.1.1, from its host name n1" in cause["summary"], cause
    assert "GLOO_SOCKET_IFNAME" in cause["remediation"], cause
    assert "dist.rendezvous" not in run.results  # the store formed: the roll call found nothing
    assert cause["duration_s"] <= PROBE_S, cause


def test_one_host_name_resolving_to_loopback_works_and_warns(two_nodes: MultiCluster, tmp_path: Path) -> None:
    write_hosts(two_nodes, "n2", hosts_with(two_nodes, n2="127.0.1.1"))
    run = run_dist(two_nodes, tmp_path)
    assert run.returncode == 0, run.out  # n2's 127.0.1.1 is greater than 10.77.0.11: n2 opens the connection
    cause = the_cause(run, "dist.transport", "dist.transport.loopback")
    assert cause["status"] == "warn" and cause["measured"]["nodes"] == ["n2"], cause
    assert "worked here only because n2 opened every connection" in cause["summary"], cause


def test_the_interface_gloo_uses_is_up_without_carrier(two_nodes: MultiCluster, tmp_path: Path) -> None:
    with second_network(two_nodes) as peers:
        cut_cable(two_nodes, peers["n2"])  # n2's eth1 stays up, its peer at the bridge goes down
        assert "NO-CARRIER" in two_nodes.in_node("n2", "ip", "link", "show", "eth1").stdout
        run = run_dist(two_nodes, tmp_path, "export GLOO_SOCKET_IFNAME=eth1")
    cause = the_cause(run, "dist.transport", "dist.transport.no_carrier")
    assert cause["measured"]["nodes"] == ["n2"], cause
    assert (
        "has no carrier on n2's eth1 (10.78.0.12, chosen by GLOO_SOCKET_IFNAME=eth1)" in cause["summary"]
    ), cause
    assert cause["duration_s"] <= PROBE_S, cause


def test_healthy_twin_on_a_second_network(two_nodes: MultiCluster, tmp_path: Path) -> None:
    with second_network(two_nodes):
        run = run_dist(two_nodes, tmp_path, "export GLOO_SOCKET_IFNAME=eth1")
    healthy(run)
    assert "10.78.0.12 → 10.78.0.11" in run.results["dist.transport"]["summary"], run.results


def test_a_firewall_letting_the_store_through_but_not_gloo(two_nodes: MultiCluster, tmp_path: Path) -> None:
    rules = [
        ["-i", "eth0", "-m", "state", "--state", "ESTABLISHED,RELATED", "-j", "ACCEPT"],
        ["-i", "eth0", "-p", "tcp", "--dport", PORT, "-j", "ACCEPT"],
        ["-i", "eth0", "-p", "tcp", "--dport", "6818", "-j", "ACCEPT"],  # slurmd: the job must start
        ["-i", "eth0", "-p", "tcp", "-j", "DROP"],
    ]
    with iptables(two_nodes, "n1", *rules):
        run = run_dist(two_nodes, tmp_path)
    cause = the_cause(run, "dist.transport", "dist.transport.blocked")
    assert cause["measured"]["nodes"] == ["n1"], cause
    assert cause["summary"].startswith("n2 could not open gloo's connection to n1 at 10.77.0.11:"), cause
    assert "lets the rendezvous port through but not gloo's own ports" in cause["summary"], cause
    assert cause["duration_s"] <= PROBE_S, cause


def test_a_slow_link_is_a_figure_and_a_warning_naming_the_node(
    two_nodes: MultiCluster, tmp_path: Path
) -> None:
    with shaped(two_nodes, "n2", "50mbit"):
        run = run_dist(two_nodes, tmp_path)
    assert run.returncode == 0, run.out  # slow is not broken
    cause = the_cause(run, "dist.transport", "dist.transport.slow")
    assert cause["status"] == "warn" and cause["measured"]["nodes"] == ["n2"], cause
    assert "n2's eth0 is shaped by tc (tbf rate 50 Mbit/s)" in cause["summary"], cause
    (slow,) = cause["measured"]["slow"]
    assert slow["from"] == "n2" and 3.0 < slow["MBps"] < 7.0, slow  # 50 Mbit/s = 6.25 MB/s
    assert run.results["dist.all_reduce"]["status"] == "pass"


def test_healthy_twin_of_the_slow_link(two_nodes: MultiCluster, tmp_path: Path) -> None:
    with shaped(two_nodes, "n2", "10gbit"):  # the same qdisc, at a rate the probe does not notice
        run = run_dist(two_nodes, tmp_path)
    healthy(run)
    assert "1 MiB" in run.results["dist.transport"]["summary"], run.results
