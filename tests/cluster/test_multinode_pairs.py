"""dist.pairs on real Slurm nodes: busbw of every node pair, and one node's limited link named as the slow one.

Real: the Slurm nodes (network namespaces joined by veth pairs, tests/cluster/multinode.py), gloo all-reduce
between them, and a token-bucket limit (`tc qdisc ... tbf rate 50mbit`) on one node's eth0 inside that node's
namespace only: the kernel really throttles that node's traffic. Simulated: nothing (no GPU: --allow-cpu, gloo).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster import multinode
from tests.cluster.multinode import MultiCluster
from tests.helpers.slurm import ROOT, SEARCH_PATH, multinode_missing

# timing: the verdicts rest on measured speed (busbw, matmul figures), so these run alone, after the other streams
pytestmark = [pytest.mark.slurm, pytest.mark.timing, pytest.mark.slow]
LIMIT = ("tbf", "rate", "50mbit", "burst", "32kbit", "latency", "50ms")


def pairs_result(
    cluster: MultiCluster, tmp_path: Path, *extra: str, per_node: int = 1
) -> tuple[dict[str, Any], float]:
    """srun on every node (`per_node` ranks each) of `envcheck.distributed --pairwise`: (dist.pairs, seconds)."""
    report = tmp_path / "pairs.json"
    began = time.monotonic()
    done = cluster.run(
        "srun",
        "-N",
        str(cluster.size),
        "-n",
        str(cluster.size * per_node),
        sys.executable,
        "-m",
        "envcheck.distributed",
        "--allow-cpu",
        "--pairwise",
        "--timeout",
        "30",
        "--json",
        str(report),
        *extra,
        timeout=90,
    )
    took = time.monotonic() - began
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    results = {r["name"]: r for r in json.loads(report.read_text())["results"]}
    result = results["dist.pairs"]
    figures = ", ".join(f"{'-'.join(p['nodes'])} {p['busbw_gbps']:.4f}" for p in result["measured"]["pairs"])
    print(
        f"\ndist.pairs verdict after {took:.1f}s: {result['status']}: {figures} GB/s busbw", file=sys.stderr
    )
    assert done.returncode == (1 if result["status"] == "fail" else 0), done.stdout + done.stderr
    return result, took


def busbw(result: dict[str, Any]) -> dict[tuple[str, ...], float]:
    return {tuple(p["nodes"]): p["busbw_gbps"] for p in result["measured"]["pairs"]}


@pytest.fixture
def limited_n2(three_nodes: MultiCluster) -> Iterator[MultiCluster]:
    """n2's eth0 limited to 50 Mbit/s by tc inside n2's namespace; removed afterwards, and seen to be removed."""
    three_nodes.in_node("n2", "tc", "qdisc", "add", "dev", "eth0", "root", *LIMIT)
    try:
        yield three_nodes
    finally:
        three_nodes.in_node("n2", "tc", "qdisc", "del", "dev", "eth0", "root")
    assert "tbf" not in three_nodes.in_node("n2", "tc", "qdisc", "show", "dev", "eth0").stdout


def test_every_pair_measured_and_none_slow(three_nodes: MultiCluster, tmp_path: Path) -> None:
    result, _ = pairs_result(three_nodes, tmp_path, per_node=2)  # a pair's group: both ranks of both nodes
    assert result["status"] == "pass", result
    assert result["measured"]["rounds"] == 3 and set(busbw(result)) == {
        ("n1", "n2"),
        ("n1", "n3"),
        ("n2", "n3"),
    }
    assert {tuple(p["ranks"]) for p in result["measured"]["pairs"]} == {
        (0, 1, 2, 3),
        (0, 1, 4, 5),
        (2, 3, 4, 5),
    }
    assert all(v > 0 for v in busbw(result).values()), result
    assert "slow_nodes" not in result["measured"], result


def test_a_limited_link_on_one_node_names_that_node(limited_n2: MultiCluster, tmp_path: Path) -> None:
    result, _ = pairs_result(limited_n2, tmp_path)
    stats = limited_n2.in_node("n2", "tc", "-s", "-j", "qdisc", "show", "dev", "eth0").stdout
    assert json.loads(stats)[0]["bytes"] > 1 << 20, stats  # the premise: n2's traffic went through the limit
    assert (
        result["status"] == "warn" and result["fault_class"] == "node" and result["code"] == "dist.pair.slow"
    )
    assert result["measured"]["slow_nodes"] == ["n2"], result
    assert sorted(result["measured"]["slow_pairs"]) == [["n1", "n2"], ["n2", "n3"]], result
    assert "node n2 slow: every pair with it is below" in result["summary"], result
    figures = busbw(result)
    assert figures[("n1", "n2")] < 0.01 and figures[("n2", "n3")] < 0.01, figures  # 50 Mbit/s = 0.00625 GB/s
    assert figures[("n1", "n3")] > 4 * max(figures[("n1", "n2")], figures[("n2", "n3")]), figures


def test_two_nodes_against_the_floor(two_nodes: MultiCluster, tmp_path: Path) -> None:
    two_nodes.in_node("n2", "tc", "qdisc", "add", "dev", "eth0", "root", *LIMIT)
    try:
        result, _ = pairs_result(two_nodes, tmp_path, "--min-busbw", "0.05", "--strict-perf")
    finally:
        two_nodes.in_node("n2", "tc", "qdisc", "del", "dev", "eth0", "root")
    assert result["status"] == "fail" and result["code"] == "dist.pair.slow", result
    assert (
        "the only pair n1–n2" in result["summary"]
        and "the 0.05 GB/s floor (--min-busbw)" in result["summary"]
    )
    assert "cannot say which one is slow" in result["summary"], result


def test_the_fixture_leaves_nothing_behind_after_a_tc_change() -> None:
    why = multinode_missing()
    if why:
        if os.environ.get("ENVCHECK_REQUIRE_SLURM") == "1":
            pytest.fail(f"multi-node slurm test cannot run and ENVCHECK_REQUIRE_SLURM=1: {why}")
        pytest.skip(why)
    host_qdiscs = subprocess.run(
        ["tc", "qdisc", "show"], capture_output=True, text=True, timeout=10, check=True
    )
    d = Path(tempfile.mkdtemp(prefix="envcheck-slurm2n-tc-"))
    cluster = multinode.start(d, 2, {"PATH": SEARCH_PATH, "PYTHONPATH": str(ROOT)})
    try:
        cluster.in_node("n2", "tc", "qdisc", "add", "dev", "eth0", "root", *LIMIT)
        assert "tbf" in cluster.in_node("n2", "tc", "qdisc", "show", "dev", "eth0").stdout
    finally:
        multinode.stop(cluster)  # no `tc qdisc del`: the namespace (and the limited veth) must take it along
    assert multinode.leftovers(cluster) == []
    after = subprocess.run(["tc", "qdisc", "show"], capture_output=True, text=True, timeout=10, check=True)
    assert after.stdout == host_qdiscs.stdout  # the host's own links never saw the limit
