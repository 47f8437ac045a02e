"""The multi-node Slurm deployments of the docs on the real 2-node Slurm. docs/examples/slurm-envcheck-dist.sbatch submitted with `sbatch` to the real 2-node Slurm of
tests/cluster/multinode.py (each node its own network namespace): one torchrun agent per node, c10d rendezvous on the
allocation's first node (`scontrol show hostnames`), the per-job port, the JSON and JUnit reports in the job's folder.

Read from the doc file. Staged, because no GPU exists here: the script's `#SBATCH --gpus-per-node=8` is left out
(this Slurm has no GPU gres, so sbatch would refuse it) and SLURM_GPUS_ON_NODE, which Slurm sets from that request,
is exported as 2: two gloo ranks per node instead of eight NCCL ones. Everything else runs as written.
"""

from __future__ import annotations

import json
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.cluster.documented import EXAMPLES
from tests.cluster.multinode import MultiCluster

pytestmark = [pytest.mark.slurm, pytest.mark.slow]
GPU_LINE = "#SBATCH --gpus-per-node=8\n"


def test_the_sbatch_example_runs_torchrun_across_both_nodes(two_nodes: MultiCluster, tmp_path: Path) -> None:
    text = (EXAMPLES / "slurm-envcheck-dist.sbatch").read_text()
    assert GPU_LINE in text, "the GPU request the test leaves out has changed: update the test with the doc"
    script = tmp_path / "envcheck-dist.sbatch"
    script.write_text(text.replace(GPU_LINE, ""))
    tmp_path.chmod(0o755)
    venv_bin = str(
        Path(sys.executable).parent
    )  # "bare metal or a venv with envcheck installed": torchrun on PATH
    began = time.monotonic()
    done = two_nodes.run(
        "sbatch",
        "--wait",
        f"--chdir={tmp_path}",
        f"--output={tmp_path}/slurm-%j.out",
        "--export=ALL,SLURM_GPUS_ON_NODE=2",
        str(script),
        timeout=400,
        # TMPDIR: torchrun's agent leaves a $TMPDIR/torchelastic_* tree per node and never removes it
        env={"PATH": f"{venv_bin}:{two_nodes.env['PATH']}", "TMPDIR": str(tmp_path)},
    )
    job_id = done.stdout.split()[-1] if done.stdout.split() else "?"
    out = next(iter(tmp_path.glob("slurm-*.out")), None)
    log = out.read_text()[-4000:] if out else ""
    assert done.returncode == 0, done.stdout + done.stderr + log
    report = json.loads((tmp_path / f"envcheck-dist-{job_id}.json").read_text())
    results = {r["name"]: r for r in report["results"]}
    assert results["dist.all_reduce"]["status"] == "pass", results["dist.all_reduce"]
    assert results["dist.all_reduce"]["measured"]["world_size"] == 4
    assert results["dist.pairs"]["status"] in ("pass", "warn"), results["dist.pairs"]  # two nodes to pair
    suite = ET.parse(tmp_path / f"envcheck-dist-{job_id}.xml").getroot()
    assert suite.find(".//testcase[@name='dist.all_reduce']") is not None
    assert "Traceback" not in log
    print(f"\nsbatch example: {time.monotonic() - began:.1f}s", file=sys.stderr)


def _srun_block() -> list[str]:
    """docs/cluster.md's "Many nodes without torchrun" commands, as written (comments dropped)."""
    import re

    text = (EXAMPLES.parent / "cluster.md").read_text()
    (block,) = re.findall(r"### Many nodes without torchrun\n.*?```sh\n(.*?)```", text, flags=re.S)
    return [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]


def test_the_srun_commands_of_the_docs_run_across_both_nodes(two_nodes: MultiCluster, tmp_path: Path) -> None:
    """`srun -N 2 --ntasks-per-node 8 python -m envcheck.distributed --json report.json` (8 ranks per node, one per
    GPU: 2 here, on CPU) and `srun -n 2 python -m envcheck.distributed --allow-cpu`, with `python` the venv's."""
    first, second = _srun_block()
    assert first == "srun -N 2 --ntasks-per-node 8 python -m envcheck.distributed --json report.json"
    assert second == "srun -n 2 python -m envcheck.distributed --allow-cpu"
    venv_bin = str(Path(sys.executable).parent)
    env = {"PATH": f"{venv_bin}:{two_nodes.env['PATH']}"}
    argv = first.replace("--ntasks-per-node 8", "--ntasks-per-node 2").split()
    argv[1:1] = [f"--chdir={tmp_path}"]  # report.json lands in the job's folder
    done = two_nodes.run(*argv, timeout=200, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    results = {r["name"]: r for r in json.loads((tmp_path / "report.json").read_text())["results"]}
    assert results["dist.all_reduce"]["status"] == "pass"
    assert results["dist.all_reduce"]["measured"]["world_size"] == 4
    done = two_nodes.run(*second.split(), timeout=200, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "dist.all_reduce" in done.stdout + done.stderr
