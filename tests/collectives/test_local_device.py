"""The multi-node entry picks each rank's GPU from what the process can see, not `cuda:LOCAL_RANK` blindly.

Under `srun --gpus-per-task=1` (which implies `--gpu-bind=per_task:1`) every task sees one GPU, its own, as device 0;
`cuda:LOCAL_RANK` then fails on every rank above 0 of a healthy node ("CUDA error: invalid device ordinal",
ACEsuit/mace#435). `python -m envcheck.distributed` once refused such a rank ("LOCAL_RANK 1 has no GPU").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envcheck.collectives.local_gpu import local_device, local_rank_problem, local_world_size
from tests.helpers import ROOT
from tests.helpers.ports import free_port


@pytest.mark.parametrize(
    ("local_rank", "visible", "local_world", "device"),
    [
        (0, 8, 8, 0),
        (5, 8, 8, 5),  # torchrun: every process sees the node's 8 GPUs
        (1, 1, 8, 0),
        (7, 1, 8, 0),
        (1, 1, None, 0),  # srun --gpus-per-task=1: each task sees its own GPU as device 0
        (2, 2, 4, 0),
        (3, 2, 4, 1),  # srun --gpus-per-task=2: each task sees its own two
        (2, 2, 2, None),
        (2, 2, None, None),  # more local ranks than GPUs with no binding that explains it
        (0, 0, 1, None),  # no GPU at all
    ],
)
def test_the_device_comes_from_what_the_process_sees(
    local_rank: int, visible: int, local_world: int | None, device: int | None
) -> None:
    assert local_device(local_rank, visible, local_world) == device


def test_one_visible_gpu_with_local_rank_1_is_not_a_problem_any_more() -> None:
    """The old rule (`LOCAL_RANK < visible`) named this healthy rank: LOCAL_RANK 1, CUDA_VISIBLE_DEVICES=3."""
    assert local_rank_problem(1, 1, "3", 8) is None
    problem = local_rank_problem(2, 2, "0,1", 2)
    assert problem is not None and "LOCAL_RANK 2" in problem and "--nproc-per-node 2" in problem


def test_the_local_world_comes_from_torchrun_or_from_slurms_layout() -> None:
    assert local_world_size({"LOCAL_WORLD_SIZE": "8"}, 3) == 8
    slurm = {"SLURM_STEP_NODELIST": "n[1-2]", "SLURM_STEP_TASKS_PER_NODE": "8(x2)"}
    assert local_world_size(slurm, 11) == 8
    assert local_world_size({"SLURM_STEP_NODELIST": "n[1-2]", "SLURM_STEP_TASKS_PER_NODE": "3,1"}, 3) == 1
    assert local_world_size({}, 0) is None


# Staged at torch's own boundary (this machine has no GPU and its torch has no NCCL): CUDA reports one visible
# device, `set_device` records its argument, and `init_process_group` with NCCL stops the rank with the device it was
# given. Everything else is real: the entry point, its argument parsing, the roll call over a real TCPStore, the
# side channel, rank 0's verdict and the JSON report.
STAGED_CUDA = """
import torch, torch.distributed as dist
torch.cuda.is_available = lambda: True
torch.cuda.device_count = lambda: 1
torch.cuda.set_device = lambda device: None
def init_process_group(backend, **kwargs):
    raise RuntimeError(f"staged stop: {backend} on {kwargs.get('device_id')}")
dist.init_process_group = init_process_group
"""


def test_the_entry_gives_local_rank_1_the_one_gpu_it_sees(tmp_path: Path) -> None:
    """`srun --gpus-per-task=1`'s second task on a node: LOCAL_RANK=1, one GPU visible (CUDA_VISIBLE_DEVICES=1)."""
    (tmp_path / "sitecustomize.py").write_text(STAGED_CUDA)
    env = {
        **os.environ,
        "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}",
        "RANK": "0",
        "WORLD_SIZE": "1",
        "LOCAL_RANK": "1",
        "LOCAL_WORLD_SIZE": "2",
        "CUDA_VISIBLE_DEVICES": "1",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
    }
    report = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "envcheck.distributed", "--json", str(report), "--timeout", "20"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.returncode in (0, 1) and "internal error" not in done.stderr, done.stderr[
        -3000:
    ]  # never envcheck's own
    results = {r["name"]: r for r in json.loads(report.read_text())["results"]}
    summary = results["dist.all_reduce"]["summary"]
    assert "staged stop: nccl on cuda:0" in summary, summary
    assert "has no GPU" not in summary
