"""NCCL ranks are forked from the coordinator only while cuInit has not run in it.

A child forked after cuInit fails its first CUDA call with "CUDA error: initialization error". On the H100
proof host libcuda was already mapped in a coordinator that had never called cuInit, so the decision asks
the driver itself: cuDeviceGetCount returns CUDA_ERROR_NOT_INITIALIZED (3) until cuInit has run. No GPU or
driver here: a stand-in libcuda.so.1 with that contract is compiled from C in the test.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envcheck.collectives.launch import can_fork, cuda_driver_initialised, mapped_libcuda

MAPS_WITH_DRIVER = (
    "7f2c1a000000-7f2c1a200000 r-xp 00000000 08:01 1234 /usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04\n"
)
MAPS_TORCH_ONLY = (
    "7f2c1b000000-7f2c1b400000 r-xp 00000000 08:01 99 "
    "/venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so\n"
    "7f2c1c000000-7f2c1c100000 r-xp 00000000 08:01 98 "
    "/venv/lib/python3.12/site-packages/nvidia/cuda_runtime/lib/libcudart.so.13\n"
)
STUB_DRIVER = r"""
static int initialised = 0;
int cuInit(unsigned int flags) { (void)flags; initialised = 1; return 0; }
int cuDeviceGetCount(int *count) {
    if (!initialised) return 3;  /* CUDA_ERROR_NOT_INITIALIZED */
    *count = 1;
    return 0;
}
"""


def test_the_mapped_driver_is_found_by_path() -> None:
    assert mapped_libcuda(MAPS_WITH_DRIVER) == "/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04"
    assert mapped_libcuda(MAPS_TORCH_ONLY) is None  # torch and cudart are mapped at import
    assert cuda_driver_initialised(MAPS_TORCH_ONLY) is False


@pytest.fixture(scope="module")
def stub_driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the stand-in libcuda")
    folder = tmp_path_factory.mktemp("driver")
    (folder / "stub.c").write_text(STUB_DRIVER)
    lib = folder / "libcuda.so.1"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(folder / "stub.c")], check=True, timeout=60)
    return lib


def test_a_mapped_driver_that_never_ran_cuinit_allows_forking_nccl_ranks(stub_driver: Path) -> None:
    """In a fresh interpreter: the stand-in driver is mapped (as on the H100 host) but not initialised, so
    NCCL ranks may be forked; after cuInit they must be spawned."""
    # Only the stand-in's lines of /proc/self/maps: on a GPU host the real libcuda is mapped too (seen on the
    # H100 proof host) and would answer for itself.
    code = (
        f"import ctypes\nlib = ctypes.CDLL({str(stub_driver)!r})\n"
        "from envcheck.collectives.launch import can_fork, mapped_libcuda\n"
        f"maps = lambda: ''.join(l for l in open('/proc/self/maps') if {str(stub_driver)!r} in l)\n"
        "print(mapped_libcuda(maps()) is not None, can_fork('nccl', maps()))\n"
        "lib.cuInit(0)\nprint(can_fork('nccl', maps()), can_fork('gloo', maps()))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.stdout.split() == ["True", "True", "False", "True"], out.stdout + out.stderr


@pytest.mark.parametrize(("backend", "fork"), [("nccl", True), ("gloo", True)])
def test_without_a_driver_both_backends_fork(backend: str, fork: bool) -> None:
    assert can_fork(backend, MAPS_TORCH_ONLY) is fork


def test_an_unreadable_driver_is_taken_as_initialised() -> None:
    """A libcuda path that cannot be opened without loading it: assume the worst and spawn."""
    assert can_fork("nccl", "7f00-7f01 r-xp 0 08:01 1 /nonexistent/libcuda.so.1\n") is False


def test_choosing_ranks_does_not_initialise_cuda_in_this_process() -> None:
    """The real coordinator code path, in a fresh interpreter: after choose_ranks, cuInit has not run
    (on this CPU machine trivially so; on a GPU host because device_count() asks NVML first)."""
    code = (
        "from envcheck.collectives.common import choose_ranks\n"
        "from envcheck.collectives.launch import cuda_driver_initialised, mapped_libcuda\n"
        "from envcheck.core.check import Context\n"
        "print(choose_ranks(Context()), mapped_libcuda(), cuda_driver_initialised())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip().endswith("False"), out.stdout + out.stderr
