"""`envcheck fleet` on reports from a real 5-node Slurm (tests/cluster/multinode.py), one node slowed for real.

Real: slurmctld and five slurmd (a network, UTS and mount namespace each), srun, `envcheck bench --allow-cpu --json` on
each node (bench.cpu_matmul: the CPU matmul figures envcheck reports), and the slowdown: a CFS quota (cgroup v2
cpu.max, or v1 cpu.cfs_quota_us) on the slowed node's bench worker, the process that measures, moved into it as its
fork server forks it. Nothing is staged. The slowed node's own bench has nothing to compare with; the fleet names it,
and no other node.

Seen here first with dist.busbw's peak (gloo over each node's loopback, slowed by a quota or a `tc` token bucket): the
slowed node fell 5 to 20x, but healthy nodes measured on this shared 2-core machine spread from 0.3 to 1.9 GB/s, so
its MAD was as wide as the fault and the rule (rightly) named no one. The single-threaded matmul's median of
repetitions stayed within 3% across healthy nodes in most runs, but not in a fresh-clone CI run beside other work (15 to
101 GFLOP/s): every node now runs in a cgroup that outweighs the rest of the machine, so the only thing that
slows a node is the quota.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.multinode import MultiCluster
from tests.helpers import run_cli
from tests.helpers.slurm import ROOT

# timing: the verdict rests on measured matmul speed, so this runs alone, after the Docker, Slurm and long streams
pytestmark = [pytest.mark.slurm, pytest.mark.timing, pytest.mark.slow]
SLOW = "n3"


def cpu_group(name: str, quota: bool) -> tuple[Path, Path]:
    """A new cgroup that outweighs every other process on the machine (cgroup v2 cpu.weight 10000, v1 cpu.shares
    262144: a process in it gets about 91% (v2) or 96% (v1) of its CPU against ten default-weight processes there) and,
    with `quota`, is capped at a fifth of a CPU in 10 ms periods (2 ms each: shorter than a 1024x1024 matmul's
    repetition on any CPU, so the throttling shows in its median). A third was not enough: in a CI run whose healthy
    nodes measured 95 to 112 GFLOP/s at 1024 (150 to 166 on a quiet machine: noise from outside the machine slows
    the large size most), the slowed node measured 51.6, half the median but a modified z-score of 2.8 (the rule
    wants 3.5). A fifth measured 14 to 24 GFLOP/s here. By cgroup v2 where the v2 tree has the cpu controller, else
    the v1 files. Returns it and its parent's cgroup.procs file (to move the process back)."""
    v2 = Path("/sys/fs/cgroup")
    for root in (v2, v2 / "unified"):
        controllers = root / "cgroup.controllers"
        if controllers.is_file() and "cpu" in controllers.read_text().split():
            limit = {"cpu.max": "2000 10000"} if quota else {}
            return made(root / name, {"cpu.weight": "10000", **limit}), root / "cgroup.procs"
    root = v2 / "cpu"
    if not (root / "cgroup.procs").is_file():
        pytest.skip("no cgroup cpu controller to set a quota with")
    limit = {"cpu.cfs_period_us": "10000", "cpu.cfs_quota_us": "2000"} if quota else {}
    return made(root / name, {"cpu.shares": "262144", **limit}), root / "cgroup.procs"


def made(group: Path, settings: dict[str, str]) -> Path:
    """A new cgroup with `settings` written in order; none is left when a write fails."""
    group.mkdir()
    try:
        for name, value in settings.items():
            (group / name).write_text(value)
    except OSError:
        group.rmdir()
        raise
    return group


@dataclass(frozen=True)
class Shield:
    """The slowed node's cgroup (its slurmd's, so its job steps') and the quota its bench worker is moved into."""

    slowed: Path
    quota: Path


@contextmanager
def shielded_with_quota(cluster: MultiCluster, slowed: str) -> Iterator[Shield]:
    """Every node's slurmd (and so every job step it starts from now on) in a cgroup of its own that the other work on
    this machine cannot take CPU from, and a quota group for the `slowed` node's measurement. A test that judges
    measured speed must make the difference it looks for larger than any load can hide (on a busy 2-core
    machine healthy nodes measured 15 to 101 GFLOP/s, and the quota's node was no outlier): the healthy nodes now
    measure the CPU, not the load, and only the quota slows the slowed one."""
    groups: list[tuple[Path, Path]] = []
    try:
        for i, node in enumerate(cluster.nodes):
            slurmd = cluster.procs[2 + i]  # munged, slurmctld, then the slurmds in node order
            group, parent = cpu_group(f"envcheck-fleet-{os.getpid()}-{node}", quota=False)
            groups.append((group, parent))
            (group / "cgroup.procs").write_text(str(slurmd.pid))
        groups.append(cpu_group(f"envcheck-fleet-{os.getpid()}-quota", quota=True))
        yield Shield(slowed=groups[cluster.nodes.index(slowed)][0], quota=groups[-1][0])
    finally:
        left = [group for group, parent in groups if not emptied(group, parent)]
        assert not left, f"cgroups left behind (a process kept them busy): {left}"


def emptied(group: Path, parent: Path) -> bool:
    """Move every process in `group` back to `parent` and remove it; a process forked meanwhile is moved on the next of
    a few tries. Whether it is gone."""
    for _ in range(20):
        for pid in (group / "cgroup.procs").read_text().split():
            try:
                parent.write_text(pid)
            except OSError:  # the process ended meanwhile
                pass
        try:
            group.rmdir()
            return True
        except OSError:  # busy: a process arrived between the read and the rmdir
            time.sleep(0.05)
    return False


FORK_SERVER = "envcheck.core.isolation.forkserver"


def _cmdline(pid: str) -> str:
    if not pid:  # /proc//cmdline would be the kernel's
        return ""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:  # it ended
        return ""


def _parent(pid: str) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat[stat.rindex(")") + 2 :].split()[1]  # the field after the state; the name may hold spaces


@contextmanager
def quota_on_its_workers(shield: Shield) -> Iterator[list[str]]:
    """While the slowed node's bench runs: every 5 ms, each worker its fork server has forked (a process whose command
    line and whose parent's are the fork server's) moves into the quota group. So only the measurement is throttled,
    not the start-up: under a fifth of a CPU the fork server's import of torch took 77 to 111 s here (time-sliced, it
    cost this machine several times its CPU), and the bench measures its sizes in order, the 1024 one last. Yields the
    pids moved."""
    moved: list[str] = []
    failed: list[BaseException] = []
    stop = threading.Event()

    def watch() -> None:
        try:
            while not stop.is_set():
                for pid in (shield.slowed / "cgroup.procs").read_text().split():
                    if FORK_SERVER in _cmdline(pid) and FORK_SERVER in _cmdline(_parent(pid)):
                        try:
                            (shield.quota / "cgroup.procs").write_text(pid)
                            moved.append(pid)
                        except OSError:  # it ended meanwhile
                            pass
                stop.wait(0.005)
        except BaseException as exc:  # the test names it, not a silent thread
            failed.append(exc)

    watcher = threading.Thread(target=watch, name="quota-watcher", daemon=True)
    watcher.start()
    try:
        yield moved
    finally:
        stop.set()
        watcher.join(timeout=10)
    if failed:
        raise failed[0]


def node_reports(cluster: MultiCluster, folder: Path, shield: Shield) -> dict[str, dict[str, Any]]:
    """Each node's `envcheck bench --allow-cpu --quick --cpu-threads 1 --only bench.cpu_matmul --json <hostname>.json`,
    one node after another (a single-threaded matmul timed as the median of its repetitions: the other work on this
    shared machine interrupts a repetition now and then, and the median leaves those out); the SLOW node's measured
    under the quota."""
    cmd = " ".join(
        shlex.quote(a)
        for a in (
            sys.executable,
            "-m",
            "envcheck",
            "bench",
            "--allow-cpu",
            "--quick",
            "--cpu-threads",
            "1",
            "--only",
            "bench.cpu_matmul",
            "--timeout",
            "200",
        )
    )
    for node in cluster.nodes:
        with quota_on_its_workers(shield) if node == SLOW else nullcontext([]) as moved:
            done = cluster.run(
                "srun",
                "-w",
                node,
                "-N",
                "1",
                "-n",
                "1",
                "sh",
                "-c",
                f"cd {shlex.quote(str(ROOT))} && {cmd} --json {shlex.quote(str(folder))}/$(hostname).json",
                timeout=300,
                env={"PYTHONPATH": str(ROOT)},
            )
        assert done.returncode == 0, f"{node}: {done.stdout}{done.stderr}"
        assert moved or node != SLOW, f"{node}: no bench worker was seen, so none was slowed"
        if node == SLOW:  # the kernel throttled what was moved (cpu.stat: nr_throttled in v1 and v2)
            stat = dict(line.split() for line in (shield.quota / "cpu.stat").read_text().splitlines())
            assert int(stat["nr_throttled"]) > 0, (
                f"{node}: its bench worker was moved but never throttled: {stat}"
            )
    return {p.stem: json.loads(p.read_text()) for p in folder.glob("*.json")}


def test_the_fleet_names_the_node_under_a_cpu_quota_and_no_other(
    five_nodes: MultiCluster, tmp_path: Path
) -> None:
    reports = tmp_path / "reports"
    reports.mkdir()
    with shielded_with_quota(five_nodes, SLOW) as shield:
        runs = node_reports(five_nodes, reports, shield)
    assert {r["device"]["host"] for r in runs.values()} == set(
        five_nodes.nodes
    )  # the bench says which node it ran on
    figures = {n: {f["key"]: f["value"] for f in r["figures"]} for n, r in runs.items()}
    # --margin 50: the healthy nodes are shielded from the machine's other work (shielded_with_quota); the quota took
    # 84 to 92% off the 1024 size here, far past any spread left between them
    done = run_cli(
        "fleet",
        str(reports),
        "--margin",
        "50",
        "--json",
        str(tmp_path / "fleet.json"),
        "--html",
        str(tmp_path / "f.html"),
    )
    doc = json.loads((tmp_path / "fleet.json").read_text())
    print(f"\nGFLOP/s per node: {figures}\n{done.stdout}", file=sys.stderr)
    assert done.returncode == 1, done.stdout + done.stderr
    assert [o["node"] for o in doc["outlier_nodes"]] == [SLOW], figures
    violated = {v["metric"] for v in doc["outlier_nodes"][0]["violations"]}
    # 1024: each repetition needs about 12 ms of CPU (2 x 1024^3 flops at 170 GFLOP/s here; no core of today does a
    # single-threaded fp32 matmul faster than about 220), several of the quota's 2 ms windows, so every one is slowed.
    # A smaller size may fit one window on a fast CPU and its median then misses the quota: at 512 (1.6 ms here, inside
    # even the 2 ms window) the slowed node measured 151 GFLOP/s against the others' 163 to 175 in CI
    assert "cpu_matmul.float32.n1024" in violated, violated
    assert {v["code"] for v in doc["outlier_nodes"][0]["violations"]} == {"fleet.matmul_slow"}
    assert doc["groups"][0]["group"] == "no GPU (2 CPUs)" and doc["groups"][0]["nodes"] == 5
    assert doc["codes"] == {"fleet.matmul_slow": 1}
