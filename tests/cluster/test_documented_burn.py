"""The burn-in's documented commands (docs/cluster.md: Burn-in), run as written with their placeholders filled: the
plain command; the Slurm job on a reserved node (docs/cluster/slurm-burn.sh, submitted with the section's own
`scontrol` and `sbatch` lines to a real slurmctld/slurmd): a healthy node leaves its reservation, a node whose burn
finds wrong bits is drained with envcheck's reason; the Kubernetes Job (docs/cluster/burn-job.yaml): its container's
command and the section's log extraction, and the manifest's shape (bound to the cordoned node, restricted PSS).

Real: envcheck, its CPU workers, Slurm (slurmctld, slurmd, munged, sbatch, scontrol, sinfo) with a real reservation.
Staged: no GPU exists here, so every command gets `--allow-cpu` and a budget of seconds (the documented 15m is the
placeholder filled); a fault is a bit flipped in one worker's outputs by the test-only burn hook
(tests/helpers/burn_faults.py); no Kubernetes cluster: kubectl's own steps (cordon, apply, wait, uncordon) are not
run, `kubectl logs` is the container's output as the kubelet keeps it (stdout and stderr together).
Cost: about 20 s per burn (a 20 s budget: the start-up counts in it); the Slurm tests need root, slurm-wlm and munge
(skipped with the reason otherwise).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.documented import CLUSTER, INSTALL, fill, launcher, manifest
from tests.cluster.pod_security import violations
from tests.helpers import ROOT, burn_faults, load_report
from tests.helpers.slurm import Cluster

# timing: a healthy burn passes only when its workers' measured throughput agrees, and each command has its budget
pytestmark = [pytest.mark.slow, pytest.mark.timing]
SECTION = "## Burn-in: a gate after a repair or before a node joins (`envcheck burn`)"
# The start-up (Python, envcheck, torch's import) counts in the budget: about 4 s with the machine to themselves (timing
# tests run alone); in the 8 s left each CPU worker's results are still compared over 4,000 times (4,164 and 4,259 in
# a 12 s burn here), enough for a flip rate of 0.2 to show and for two healthy workers' speeds to compare.
BUDGET_S = 12
BUDGET = {"--budget 15m": f"--allow-cpu --budget {BUDGET_S}s"}
FLIP = burn_faults.env("worker=1:flip:0.2")


def blocks(heading: str) -> list[list[str]]:
    """The shell blocks of a part of the burn-in section, each as its command lines."""
    text = (ROOT / "docs" / "cluster.md").read_text()
    section = text[text.index(SECTION) :]
    section = section[: section.index("\n## ", 10)]
    part = section[section.index(heading) :] if heading else section
    found = re.findall(r"```sh\n(.*?)```", part, flags=re.S)
    return [[line for line in b.splitlines() if line.strip()] for b in found]


def only_a_straggler_may_warn(report: dict[str, Any]) -> bool:
    """A healthy node's verdict: a pass, or a warning from burn.stragglers only. Two CPU workers on this machine's two
    cores, beside the test runner, can differ in speed past the 10% margin (20-40% seen; in a CI run of the Job, worker
    0 11.8% below worker 1 over the workloads' median, both at 95% of a core, so not the host's load by the rule): the
    warning is then the verdict's to give. test_cpu_burn holds when it must and must not be given; every other check
    must pass."""
    results = report["results"]
    warned = {r["name"] for r in results if r["status"] == "warn"}
    return (
        report["verdict"] in ("pass", "warn")
        and warned <= {"burn.stragglers"}
        and all(r["status"] == "pass" for r in results if r["name"] != "burn.stragglers")
    )


def test_the_documented_burn_runs_as_written(tmp_path: Path) -> None:
    (command,) = blocks("")[0]
    command = fill(command, {"envcheck ": f"{launcher(tmp_path)} ", **BUDGET})
    began = time.monotonic()
    done = subprocess.run(["sh", "-c", command], cwd=tmp_path, capture_output=True, text=True, timeout=180)
    took = time.monotonic() - began
    assert done.returncode == 0, done.stderr[-3000:]
    # the budget counts from the command's start; after it: one round, the workers' grace, the report and the plot
    assert took <= BUDGET_S + 12, took
    report = load_report((tmp_path / "burn-gpu07.json").read_text())
    by_name = {r["name"]: r for r in report["results"]}
    assert by_name["burn.corruption"]["status"] == by_name["burn.accuracy"]["status"] == "pass", report
    assert only_a_straggler_may_warn(report), report
    assert (tmp_path / "burn-plots" / "burn.png").stat().st_size > 1000


def script(folder: Path) -> Path:
    text = fill(
        (CLUSTER / "slurm-burn.sh").read_text(),
        {INSTALL: str(launcher(folder)), "burn --for preflight": "burn --allow-cpu --for preflight"},
    )
    path = folder / "slurm-burn.sh"
    path.write_text(text)
    path.chmod(0o755)
    return path


def submit(cluster: Cluster, folder: Path, env: dict[str, str]) -> int:
    """The section's Slurm lines as written (the node and the script's path filled) on a node drained for a repair;
    the exit code of the last (`sbatch --wait ... && scontrol delete ...`: the job's)."""
    lines = [fill(line, {"gpu07": cluster.node}) for line in blocks("### A Slurm job on a reserved node")[0]]
    lines[2] = fill(lines[2], {"slurm-burn.sh": str(script(folder))})
    cluster.run("scontrol", "update", f"NodeName={cluster.node}", "State=DRAIN", "Reason=repaired")
    for line in lines[:2]:
        done = cluster.run("sh", "-c", line)
        assert done.returncode == 0, (line, done.stdout, done.stderr)
    done = cluster.run(
        "sh",
        "-c",
        f"cd {folder} && {lines[2]}",
        env={"ENVCHECK_BURN_BUDGET": f"{BUDGET_S}s", **env},
        timeout=180,
    )
    assert not cluster.run("squeue", "-h").stdout.strip(), "the burn job did not end"
    return done.returncode


def reservations(cluster: Cluster) -> str:
    return cluster.run("scontrol", "show", "reservation").stdout


@pytest.fixture
def clean(cluster: Cluster) -> Iterator[Cluster]:
    yield cluster
    cluster.run("scontrol", "delete", f"reservation=burn_{cluster.node}")


@pytest.mark.slurm
def test_documented_slurm_burn_lets_a_healthy_node_leave_its_reservation(
    clean: Cluster, tmp_path: Path
) -> None:
    assert submit(clean, tmp_path, {}) == 0, (tmp_path / "slurm-1.out").read_text()[-2000:]
    assert "No reservations" in reservations(clean), reservations(clean)
    clean.wait_state("idle", timeout=15)
    doc = load_report((tmp_path / f"envcheck-burn-{clean.node}.json").read_text())
    assert only_a_straggler_may_warn(doc) and doc["facts"]["burn"]["stopped_by"] == "budget", doc


@pytest.mark.slurm
def test_documented_slurm_burn_drains_a_node_whose_gpu_flips_bits(clean: Cluster, tmp_path: Path) -> None:
    assert submit(clean, tmp_path, FLIP) == 10
    assert clean.reason().startswith("envcheck burn: [node] burn.corruption: CPU worker 1 (core "), (
        clean.reason()
    )
    assert "drain" in clean.state()
    assert f"burn_{clean.node}" in reservations(clean)  # kept until the admin has looked


def job_container() -> dict[str, object]:
    (job,) = manifest("burn-job.yaml")
    (container,) = job["spec"]["template"]["spec"]["containers"]
    return dict(container)


def test_the_burn_job_is_bound_to_the_cordoned_node_and_meets_the_restricted_standard() -> None:
    (job,) = manifest("burn-job.yaml")
    spec = job["spec"]["template"]["spec"]
    assert spec["nodeName"] == "NODE_NAME" and job["metadata"]["name"] == "envcheck-burn-NODE_NAME"
    assert {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"} in spec[
        "tolerations"
    ]
    assert job["spec"]["backoffLimit"] == 0 and spec["restartPolicy"] == "Never"
    assert violations(job) == {}


def run_job(folder: Path, env: dict[str, str]) -> tuple[int, str]:
    """The Job's container command as written (envcheck on PATH, the budget and /tmp filled), its log as the kubelet
    keeps it."""
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    launcher(bin_dir)
    command = job_container()["command"]
    assert isinstance(command, list) and command[:2] == ["sh", "-c"]
    body = fill(command[2], {**BUDGET, "/tmp/burn.json": str(folder / "burn.json")})
    done = subprocess.run(
        ["sh", "-c", body],
        env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=180,
    )
    return done.returncode, done.stdout


def extract(log: str, folder: Path) -> dict[str, object]:
    """The section's last line: `kubectl logs job/... | sed ... > envcheck-burn-gpu07.json`, on this log."""
    line = blocks("### A Kubernetes Job before a node is uncordoned")[0][-1]
    (folder / "pod.log").write_text(log)
    command = fill(line, {"kubectl logs job/envcheck-burn-gpu07": f"cat {folder / 'pod.log'}"})
    subprocess.run(["sh", "-c", command], cwd=folder, check=True, timeout=30)
    doc: dict[str, object] = load_report((folder / "envcheck-burn-gpu07.json").read_text())
    return doc


def test_the_burn_job_passes_a_healthy_node_and_its_report_is_in_its_log(tmp_path: Path) -> None:
    code, log = run_job(tmp_path, {})
    assert code == 0, log[-3000:]
    assert only_a_straggler_may_warn(extract(log, tmp_path))


def test_the_burn_job_fails_with_10_for_wrong_bits_and_names_the_gpu(tmp_path: Path) -> None:
    code, log = run_job(tmp_path, FLIP)
    assert code == 10, log[-3000:]
    assert "\n[node] burn.corruption: CPU worker 1 (core " in log
    doc = extract(log, tmp_path)
    results = {r["name"]: r for r in doc["results"]}  # type: ignore[attr-defined]
    assert results["burn.corruption"]["code"] == "burn.sdc"
    assert json.loads(json.dumps(results["burn.corruption"]["measured"]["checksums"]))  # for envcheck fleet
