"""NCCL ranks are forked from the coordinator only while it has not loaded the CUDA driver.

A child forked after cuInit fails its first CUDA call with "CUDA error: initialization error", so the
decision reads /proc/self/maps for libcuda (given here as text: no GPU or driver on this machine).
The coordinator's own GPU count must not load the driver either: it asks NVML first.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from envcheck.checks.distributed.launch import can_fork, cuda_driver_loaded

MAPS_WITH_DRIVER = ("7f2c1a000000-7f2c1a200000 r-xp 00000000 08:01 1234 "
                    "/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04\n")
MAPS_TORCH_ONLY = ("7f2c1b000000-7f2c1b400000 r-xp 00000000 08:01 99 "
                   "/venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so\n"
                   "7f2c1c000000-7f2c1c100000 r-xp 00000000 08:01 98 "
                   "/venv/lib/python3.12/site-packages/nvidia/cuda_runtime/lib/libcudart.so.13\n")


def test_driver_detection_reads_the_mapped_libraries() -> None:
    assert cuda_driver_loaded(MAPS_WITH_DRIVER) is True
    assert cuda_driver_loaded(MAPS_TORCH_ONLY) is False  # torch and cudart are mapped at import; libcuda is not


@pytest.mark.parametrize(("backend", "maps", "fork"), [
    ("nccl", MAPS_TORCH_ONLY, True),
    ("nccl", MAPS_WITH_DRIVER, False),   # e.g. a coordinator that ran torch.cuda.is_available(): spawn
    ("gloo", MAPS_WITH_DRIVER, True),    # gloo ranks never touch CUDA
])
def test_fork_only_where_the_child_can_use_cuda(backend: str, maps: str, fork: bool) -> None:
    assert can_fork(backend, maps) is fork


def test_choosing_ranks_does_not_load_the_driver_in_this_process() -> None:
    """The real coordinator code path, in a fresh interpreter: after choose_ranks, libcuda is still unmapped
    (on this CPU machine trivially so; on a GPU host because device_count() asks NVML first)."""
    code = ("from envcheck.checks.distributed.checks import choose_ranks\n"
            "from envcheck.checks.distributed.launch import cuda_driver_loaded\n"
            "from envcheck.core.check import Context\n"
            "print(choose_ranks(Context()), cuda_driver_loaded())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip().endswith("False"), out.stdout + out.stderr
