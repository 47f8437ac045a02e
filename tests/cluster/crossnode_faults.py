"""Cross-node faults staged for real on the multi-node Slurm (tests/cluster/multinode.py), each undone on the way
out, and one way to run `envcheck.distributed` across the nodes and read what rank 0 reported and when.

Every stage changes one node's own state only: its network namespace (iptables, tc, a veth without carrier), its
/etc/hosts (a bind mount the fixture owns), a process holding a port there, or what its task runs before envcheck.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.cluster.multinode import CTL_ADDR, MultiCluster, node_addr

TIMEOUT_S = (
    12  # envcheck's --timeout: the roll call's deadline (the shortest that survives this machine's load)
)
PORT = "29561"
WALL_S = 4 * TIMEOUT_S + 60  # no run may take longer than this, startup included


@dataclass
class Run:
    """One srun of envcheck.distributed: rank 0's report, all output, and when the report appeared."""

    results: dict[str, dict[str, Any]]
    out: str
    report_s: float
    returncode: int

    def bad(self) -> dict[str, dict[str, Any]]:
        """The results that warn or fail, by name."""
        return {n: r for n, r in self.results.items() if r["status"] in ("warn", "fail", "error")}

    def causes(self) -> list[str]:
        """Every finding code the report claims (a combined result lists each of its causes)."""
        found = []
        for r in self.bad().values():
            found += r["measured"].get("causes") or [r["code"]]
        return found


def run_dist(
    cluster: MultiCluster,
    tmp_path: Path,
    prelude: str = "",
    *srun: str,
    env: dict[str, str] | None = None,
    timeout_s: int = TIMEOUT_S,
    kill_on_bad_exit: bool = True,
) -> Run:
    """srun -N 2 (or `srun`) of envcheck.distributed behind a node-local shell `prelude`; the run must end (every
    rank) within WALL_S, with or without `srun -K` ending the others when one rank fails."""
    report = tmp_path / "dist.json"
    report.unlink(missing_ok=True)
    cmd = shlex.join(
        [
            sys.executable,
            "-m",
            "envcheck.distributed",
            "--allow-cpu",
            "--timeout",
            str(timeout_s),
            "--json",
            str(report),
        ]
    )
    began = time.monotonic()
    proc = subprocess.Popen(
        cluster.client(
            "srun",
            *(["-K"] if kill_on_bad_exit else []),
            *(srun or ("-N", "2", "-n", "2")),
            "sh",
            "-c",
            f"{prelude}\nexec ${{WRAP:-}} {cmd}",
        ),
        env={**cluster.env, "MASTER_PORT": PORT, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    written = None
    try:
        while proc.poll() is None and time.monotonic() - began < WALL_S:
            if written is None and report.exists():
                written = time.monotonic() - began
            time.sleep(0.1)
    finally:
        hung = proc.poll() is None
        if hung:
            proc.kill()
        out = proc.communicate(timeout=30)[0]
    assert not hung, f"the run did not end within {WALL_S}s:\n{out}"
    written = written if written is not None else time.monotonic() - began
    assert report.exists(), f"no report after {written:.1f}s:\n{out}"
    assert "Traceback" not in out, out
    results = {r["name"]: r for r in json.loads(report.read_text())["results"]}
    said = "; ".join(
        f"{n} {r['status']} {r.get('code')} ({r['duration_s']:.1f}s)" for n, r in results.items()
    )
    print(f"\nreport after {written:.1f}s: {said}", file=sys.stderr)
    return Run(results, out, written, proc.returncode)


def the_cause(run: Run, name: str, code: str) -> dict[str, Any]:
    """The report's one cause: `name` failed (or warned) with `code`, and nothing else warned or failed."""
    assert list(run.bad()) == [name], run.results
    assert run.causes() == [code], run.results
    return run.bad()[name]


def healthy(run: Run) -> None:
    """Every check passed, the transport probe included, and no cause was claimed."""
    assert run.returncode == 0, run.out
    assert run.bad() == {}, run.results
    assert run.results["dist.all_reduce"]["status"] == "pass", run.results
    assert run.results["dist.transport"]["status"] == "pass", run.results


def write_hosts(cluster: MultiCluster, node: str, text: str) -> None:
    """Rewrite node's /etc/hosts in place (the fixture's bind mount follows the inode); `two_nodes` restores it."""
    with cluster.hosts_file(node).open("r+") as f:
        f.truncate(0)
        f.write(text)


def hosts_with(cluster: MultiCluster, **names: str) -> str:
    """The standard hosts text with some names mapped elsewhere (`n2="127.0.1.1"`, `n1="10.77.0.99"`)."""
    lines = ["127.0.0.1 localhost", f"{CTL_ADDR} ctl"]
    for i, node in enumerate(cluster.nodes, 1):
        if node in names:
            lines.append(f"{names[node]} {node}")
        else:
            lines += [f"{node_addr(i)} {node}", f"::ffff:{node_addr(i)} {node}"]
    return "\n".join(lines) + "\n"


@contextmanager
def iptables(cluster: MultiCluster, node: str, *rules: list[str]) -> Iterator[None]:
    """INPUT rules in node's namespace only, flushed afterwards."""
    for rule in rules:
        cluster.in_node(node, "iptables", "-A", "INPUT", *rule)
    try:
        yield
    finally:
        cluster.in_node(node, "iptables", "-F", "INPUT")
    assert "-A INPUT" not in cluster.in_node(node, "iptables", "-S", "INPUT").stdout


@contextmanager
def holder(cluster: MultiCluster, node: str, port: str) -> Iterator[int]:
    """A plain TCP listener on `port` in node's namespace (not a c10d store); yields its pid."""
    proc = subprocess.Popen(
        [
            "nsenter",
            f"--net=/run/netns/{cluster.node_ns(node)}",
            sys.executable,
            "-c",
            "import socket,time; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
            f"s.bind(('0.0.0.0', {port})); s.listen(); print('ready', flush=True); time.sleep(600)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield proc.pid
    finally:
        proc.kill()
        proc.wait(timeout=10)


@contextmanager
def shaped(cluster: MultiCluster, node: str, rate: str) -> Iterator[None]:
    """A token-bucket rate limit on node's eth0 (this kernel has no netem), removed afterwards."""
    cluster.in_node(
        node,
        "tc",
        "qdisc",
        "add",
        "dev",
        "eth0",
        "root",
        "tbf",
        "rate",
        rate,
        "burst",
        "32kbit",
        "latency",
        "50ms",
    )
    try:
        yield
    finally:
        cluster.in_node(node, "tc", "qdisc", "del", "dev", "eth0", "root")
    assert "tbf" not in cluster.in_node(node, "tc", "qdisc", "show", "dev", "eth0").stdout


def _ip(cluster: MultiCluster, *args: str) -> None:
    subprocess.run(
        ["ip", "-n", cluster.ctl_ns, *args], check=True, capture_output=True, text=True, timeout=10
    )


@contextmanager
def second_network(cluster: MultiCluster) -> Iterator[dict[str, str]]:
    """A second network (10.78.0.0/24 on bridge br1 in the controller's namespace) with an `eth1` in every node,
    as a fabric beside the management network; yields the controller-side veth of each node, removed afterwards."""
    peers = {}
    _ip(cluster, "link", "add", "br1", "type", "bridge")
    try:
        _ip(cluster, "link", "set", "br1", "up")
        for i, node in enumerate(cluster.nodes, 1):
            peers[node] = f"w{i}"
            _ip(
                cluster,
                "link",
                "add",
                f"w{i}",
                "type",
                "veth",
                "peer",
                "name",
                "eth1",
                "netns",
                cluster.node_ns(node),
            )
            _ip(cluster, "link", "set", f"w{i}", "master", "br1", "up")
            cluster.in_node(node, "ip", "addr", "add", f"10.78.0.{10 + i}/24", "dev", "eth1")
            cluster.in_node(node, "ip", "link", "set", "eth1", "up")
        yield peers
    finally:
        for peer in peers.values():
            subprocess.run(["ip", "-n", cluster.ctl_ns, "link", "del", peer], capture_output=True, timeout=10)
        subprocess.run(["ip", "-n", cluster.ctl_ns, "link", "del", "br1"], capture_output=True, timeout=10)
    for node in cluster.nodes:
        assert "eth1" not in cluster.in_node(node, "ip", "-o", "link").stdout


def cut_cable(cluster: MultiCluster, peer: str) -> None:
    """Take the bridge side of a node's veth down: the node's end stays up, without carrier (NO-CARRIER)."""
    _ip(cluster, "link", "set", peer, "down")


def on(node: str, line: str) -> str:
    """A prelude line that runs only on `node`."""
    return f'if [ "$(hostname)" = {node} ]; then {line}; fi'
