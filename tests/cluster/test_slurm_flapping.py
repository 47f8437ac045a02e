"""No flapping, on a real 2-node Slurm (tests/cluster/multinode.py): `envcheck run --for health` as n1's
HealthCheckProgram, with a soft fault that comes and goes and a hard one.

Real: slurmctld and two slurmd, sinfo/scontrol from n1's network namespace (where n1's slurmd runs), envcheck's health
mode, its state file, dist.busbw (2 gloo ranks over n1's loopback) and the soft fault itself: a token-bucket `tc`
qdisc on n1's loopback (1 Gbit/s: the peak busbw falls from about 1 to 2 GB/s to 0.06 GB/s here), added and removed
between runs, against an explicit --min-busbw floor (perf.busbw_low, soft). The hard fault is a node that must have a
GPU and has none (gpu.lost). Nothing is staged. n2 is never touched: a wrong node drained fails the test.

The floor, 0.1 GB/s, sits where no machine's speed moves either side across it: the qdisc caps a faulted run near
0.0625 GB/s whatever the CPU (2 ranks' all-reduce of S bytes passes 2S through lo at 125 MB/s, so S / t is at most
62.5 MB/s; the 256 KB burst adds a few percent at the smallest size), while a healthy run on a machine twice as slow
as usual, beside the suite's two busy Docker and `long` streams, measured 0.227 GB/s (a floor of 0.25 failed it).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.cluster.multinode import MultiCluster
from tests.helpers.slurm import ROOT
from tests.staging import host_root

pytestmark = [pytest.mark.slurm, pytest.mark.slow]
NODE = "n1"
SOFT = ("--level", "full", "--allow-cpu", "--only", "dist.busbw", "--min-busbw", "0.1")
HARD = ("--expect-gpus", "1", "--only", "cuda.available")
HARD_GONE = ("--allow-cpu", "--only", "cuda.available")


def health(cluster: MultiCluster, state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """n1's HealthCheckProgram as slurmd starts it there (root, n1's network, SLURMD_NODENAME=n1, as on a host:
    tests/staging/host_root.py)."""
    envcheck = [sys.executable, "-m", "envcheck", "run", "--for", "health", *args]
    cmd = ["nsenter", f"--net=/run/netns/{cluster.node_ns(NODE)}", *host_root.command(str(ROOT), envcheck)]
    done = subprocess.run(
        cmd,
        env={
            **cluster.env,
            "SLURMD_NODENAME": NODE,
            "ENVCHECK_SLURM_STATE": str(state),
            "PYTHONPATH": str(ROOT),
        },
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


def set_fault(cluster: MultiCluster, on: bool) -> None:
    """The soft fault: a 1 Gbit/s token bucket on n1's loopback (or none)."""
    if on:
        cluster.in_node(
            NODE,
            "tc",
            "qdisc",
            "add",
            "dev",
            "lo",
            "root",
            "tbf",
            "rate",
            "1gbit",
            "burst",
            "256kb",
            "limit",
            "64mb",
        )
    else:
        cluster.in_node(NODE, "tc", "qdisc", "del", "dev", "lo", "root")


def drained(cluster: MultiCluster) -> bool:
    return "drain" in cluster.states()[NODE]


def test_a_soft_fault_that_comes_and_goes_drains_only_when_it_stays_and_resumes_after_two_clean_runs(
    two_nodes: MultiCluster, tmp_path: Path
) -> None:
    state = tmp_path / "slurm-prolog.json"
    fault = False
    steps = [  # (fault on?, drained after this run?, a line the run must say)
        (True, False, "(soft: 1 of 3 health runs in a row before a drain)"),
        (True, False, "(soft: 2 of 3 health runs in a row before a drain)"),
        (False, False, "perf.busbw_low is gone after 2 run(s) in a row: its streak starts again"),
        (True, False, "(soft: 1 of 3 health runs in a row before a drain)"),
        (True, False, "(soft: 2 of 3 health runs in a row before a drain)"),
        (True, True, f"envcheck: node {NODE} drained: envcheck: [node] dist.busbw: "),
        (False, True, f"node {NODE} stays drained: dist.busbw passes, clean run 1 of 2 before a resume"),
        (True, True, "(soft: 1 of 3 health runs in a row before a drain)"),  # comes back: not clean
        (False, True, f"node {NODE} stays drained: dist.busbw passes, clean run 1 of 2 before a resume"),
        (False, False, f"envcheck: node {NODE} resumed: dist.busbw passes again"),
    ]
    try:
        for n, (on, want_drained, line) in enumerate(steps, 1):
            if on != fault:
                set_fault(two_nodes, on)
                fault = on
            done = health(two_nodes, state, *SOFT)
            if want_drained:
                two_nodes.wait_states(
                    {NODE: "drained"}, timeout=15
                )  # idle -> drained (or draining) in slurmctld
            else:
                two_nodes.wait_states({NODE: "idle"}, timeout=15)
            assert drained(two_nodes) == want_drained, (n, done.stderr)
            assert line in done.stderr + done.stdout, (n, done.stdout, done.stderr)
            assert two_nodes.states()["n2"] == "idle"  # the other node is never touched
            if n == 6:
                assert "(in 3 health runs in a row)" in two_nodes.reasons()[NODE]
                assert two_nodes.reasons()[NODE].startswith(
                    "envcheck: [node] dist.busbw: all_reduce busbw peak"
                )
    finally:
        if fault:
            set_fault(two_nodes, False)


def test_a_hard_fault_drains_at_once_and_resumes_after_two_clean_runs(
    two_nodes: MultiCluster, tmp_path: Path
) -> None:
    state = tmp_path / "slurm-prolog.json"
    first = health(two_nodes, state, *HARD)
    assert first.returncode == 1 and f"node {NODE} drained: envcheck: [node] cuda.available:" in first.stderr
    two_nodes.wait_states({NODE: "drained"}, timeout=15)
    assert two_nodes.reasons()[NODE].startswith(
        "envcheck: [node] cuda.available: CUDA is not available: no /dev"
    )
    once = health(two_nodes, state, *HARD_GONE)
    assert "stays drained: cuda.available passes, clean run 1 of 2 before a resume" in once.stderr
    assert drained(two_nodes)
    twice = health(two_nodes, state, *HARD_GONE)
    assert f"node {NODE} resumed: cuda.available passes again" in twice.stderr, twice.stderr
    two_nodes.wait_states({NODE: "idle", "n2": "idle"}, timeout=15)


def test_drain_after_and_resume_after_are_settings(two_nodes: MultiCluster, tmp_path: Path) -> None:
    state = tmp_path / "slurm-prolog.json"
    set_fault(two_nodes, True)
    try:
        done = health(two_nodes, state, *SOFT, "--drain-after", "1")
    finally:
        set_fault(two_nodes, False)
    assert done.returncode == 1 and "(in 1 health runs in a row)" in done.stdout
    two_nodes.wait_states({NODE: "drained"}, timeout=15)
    resumed = health(two_nodes, state, *SOFT, "--resume-after", "1")
    assert f"node {NODE} resumed: dist.busbw passes again" in resumed.stderr, resumed.stderr
    two_nodes.wait_states({NODE: "idle"}, timeout=15)
