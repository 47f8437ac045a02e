"""envcheck as a Slurm prolog and under srun, against a real slurmctld and slurmd (tests/helpers/slurm.py)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.rank_faults import RANK_HOOK
from tests.helpers.slurm import ROOT, Cluster
from tests.staging import host_root

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def prolog(*args: str, env: str = "") -> str:
    """A prolog body running `envcheck run --for prolog ARGS` from this checkout (the prolog's PATH is bare), as on
    the host: where this machine is itself a container, without its mark (tests/staging/host_root.py)."""
    cmd = host_root.shell(str(ROOT), [sys.executable, "-m", "envcheck", "run", "--for", "prolog", *args])
    return f"cd {shlex.quote(str(ROOT))} && {env} PYTHONPATH={shlex.quote(str(ROOT))} {cmd}"


def test_healthy_prolog_lets_the_job_run(cluster: Cluster) -> None:
    cluster.set_prolog(prolog("--allow-cpu", "--only", "cuda.available,container.shm"))
    done = cluster.run("srun", "-n", "1", "echo", "job-ran")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "job-ran"
    cluster.wait_state(
        "idle", timeout=15
    )  # the node passes through "completing" after the job (seen under load)
    assert cluster.reason() == ""


def test_node_fault_in_prolog_drains_the_node_and_the_health_check_names_it(
    cluster: Cluster, tmp_path: Path
) -> None:
    # No GPU on this host: a node that must have one (--expect-gpus 1) has lost it, a node fault. The prolog calls
    # no Slurm command (Slurm's prolog guide): it exits 1, slurmd drains with its fixed reason "Prolog error"
    # and the prolog keeps its own reason in a local state file.
    state = tmp_path / "slurm-prolog.json"
    cluster.set_prolog(
        prolog(
            "--expect-gpus", "1", "--only", "cuda.available,cuda.devices", env=f"ENVCHECK_SLURM_STATE={state}"
        )
    )
    done = cluster.run("srun", "-n", "1", "echo", "job-ran")
    assert done.returncode != 0 and "job-ran" not in done.stdout
    assert "prolog failed" in done.stderr.lower()
    deadline = time.monotonic() + 10
    while "drain" not in cluster.state() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert cluster.state() in ("drained", "draining", "drain")
    assert cluster.reason() == "Prolog error"
    kept = json.loads(state.read_text())["reason"]
    assert kept.startswith("[node] cuda.available:") and "no NVIDIA driver is loaded on this host" in kept
    # The HealthCheckProgram (which may call scontrol) puts envcheck's reason where `sinfo -R` shows it.
    health = health_check(cluster, "--expect-gpus", "1", "--only", "cuda.available", state=state)
    assert health.returncode == 1, health.stderr
    assert cluster.reason().startswith(
        "envcheck: [node] cuda.available: CUDA is not available: no /dev/nvidia*"
    )


def health_check(cluster: Cluster, *args: str, state: Path) -> subprocess.CompletedProcess[str]:
    """The HealthCheckProgram as slurmd starts it (root, on the node, as on a host: tests/staging/host_root.py; the
    script sets SLURMD_NODENAME)."""
    return cluster.run(
        *host_root.command(str(ROOT), [sys.executable, "-m", "envcheck", "run", "--for", "health", *args]),
        env={"SLURMD_NODENAME": cluster.node, "ENVCHECK_SLURM_STATE": str(state)},
    )


def test_image_fault_in_prolog_does_not_drain(cluster: Cluster) -> None:
    # ENVCHECK_IMAGE=1 without /etc/envcheck/image.json: an envcheck image lost its declaration (class image).
    cluster.set_prolog(
        prolog("--allow-cpu", "--only", "image.versions,container.shm", env="ENVCHECK_IMAGE=1")
    )
    done = cluster.run("srun", "-n", "1", "echo", "job-ran")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "job-ran"
    cluster.wait_state(
        "idle", timeout=15
    )  # the node passes through "completing" after the job (seen under load)
    assert cluster.reason() == ""
    log = (cluster.dir / "prolog.log").read_text()
    assert "envcheck: warning: [image] image.versions:" in log


def test_srun_runs_the_gloo_all_reduce_without_torchrun(cluster: Cluster, tmp_path: Path) -> None:
    report = tmp_path / "dist.json"
    done = cluster.run(
        "srun",
        "-n",
        "2",
        sys.executable,
        "-m",
        "envcheck.distributed",
        "--allow-cpu",
        "--timeout",
        "60",
        "--json",
        str(report),
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    results = {r["name"]: r for r in json.loads(report.read_text())["results"]}
    assert results["dist.all_reduce"]["status"] == "pass"
    assert results["dist.all_reduce"]["measured"].get("world_size", 2) == 2
    assert results["dist.collectives"]["status"] == "pass"


def _pid_of_task(marker: str, procid: int, timeout: float = 60) -> int:
    """The pid of the srun task whose environment holds `marker` and SLURM_PROCID=procid."""
    want = {marker.encode(), f"SLURM_PROCID={procid}".encode()}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                environ = set((entry / "environ").read_bytes().split(b"\0"))
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if want <= environ and b"envcheck.distributed" in cmdline:
                return int(entry.name)
        time.sleep(0.1)
    raise AssertionError(f"task {procid} with {marker} never appeared")


def _sockets(pid: int) -> int:
    """How many sockets `pid` holds now; its descriptors open and close while we look (seen in CI: a
    descriptor listed by iterdir was gone by readlink)."""
    count = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            count += os.readlink(fd).startswith("socket:")
        except OSError:
            continue
    return count


def _wait_connected(pid: int, sockets: int = 3, timeout: float = 60) -> None:
    """Until `pid` holds `sockets` sockets: the store client and gloo's pairs, so it has joined the job."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _sockets(pid) >= sockets:
            time.sleep(1.0)  # and let it reach the all-reduce, where ENVCHECK_TEST_FAULT makes it hang
            return
        time.sleep(0.1)
    raise AssertionError(f"task {pid} never joined the job")


def test_srun_names_a_killed_task(cluster: Cluster, tmp_path: Path) -> None:
    marker = f"ENVCHECK_TEST_MARK={os.getpid()}-{time.monotonic_ns()}"
    env = {
        **cluster.env,
        marker.split("=")[0]: marker.split("=")[1],
        "ENVCHECK_TEST_FAULT": "rank=1:hang",
        "ENVCHECK_RANK_HOOK": RANK_HOOK,
    }
    proc = subprocess.Popen(
        [
            "srun",
            "-n",
            "2",
            sys.executable,
            "-m",
            "envcheck.distributed",
            "--allow-cpu",
            "--timeout",
            "60",
            "--json",
            str(tmp_path / "dist.json"),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        pid = _pid_of_task(marker, 1)
        _wait_connected(pid)
        os.kill(pid, signal.SIGKILL)  # rank 1 hangs in the all-reduce: kill it for real
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode != 0
    assert "task 1: Killed" in err
    result = json.loads((tmp_path / "dist.json").read_text())["results"][0]
    assert (
        result["name"] == "dist.all_reduce" and result["status"] == "fail" and result["fault_class"] == "node"
    )
    assert "rank 1 died" in result["summary"], result["summary"]
