"""envcheck.reference.devices: numerics (and compile) checks run on the CPU and one GPU of each model, so a healthy
8-GPU node is judged once per model, not eight times (train.state_roundtrip: 4 device pairs and one GPU-to-GPU move,
not 81 pairs); on a shared node the model's GPU that no other process uses is the one judged, and it is torch's
current device while the checks run, so nothing lands on another job's GPU 0.

Staged layers: torch.cuda's device count and properties (no GPU here), and NVML through the one NVML stand-in
(tests/staging/nvml.py: processes, memory, compute mode). Real: torch, probe.gpu_usage's reader (its budget, the PCI
keys, this process's PID left out), the checks and their loops.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from envcheck.checks.torch_compile.causes import Evidence
from envcheck.core.check import CheckSpec
from envcheck.core.result import Status
from envcheck.numerics import state_roundtrip
from envcheck.reference import devices
from envcheck.reference.devices import check_devices, cuda_devices, numerics_mode, peer_device
from tests.helpers import make_context, run_spec
from tests.staging import nvml

Model = tuple[str, int, int, int]
H100: Model = ("NVIDIA H100 80GB HBM3", 9, 0, 132)
A100: Model = ("NVIDIA A100-SXM4-80GB", 8, 0, 108)
H100_CUT: Model = (
    "NVIDIA H100 80GB HBM3",
    9,
    0,
    114,
)  # same name, fewer SMs (a MIG slice, a cut-down card): not the same
JOB = {
    "processes": [{"pid": 4242, "used_mib": 76000}],
    "memory_used_mib": 77000,
}  # another job's training run
EXCLUSIVE = 3  # NVML_COMPUTEMODE_EXCLUSIVE_PROCESS


@pytest.fixture(autouse=True)
def fresh_usage() -> Iterator[None]:
    """NVML's usage is read once per process: each test starts and ends without a cached reading."""
    devices.gpu_use.cache_clear()
    yield
    devices.gpu_use.cache_clear()


def _stage(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    gpus: list[Model],
    usage: dict[int, dict[str, Any]] | None = None,
    pci: bool = True,
) -> None:
    """torch.cuda sees `gpus` (at the stand-in's PCI addresses, 0000:3b+i:00.0); NVML answers with `usage` per GPU
    index (processes, memory_used_mib, compute_mode), or cannot be initialised when `usage` is None."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: bool(gpus))
    monkeypatch.setattr(torch.cuda, "device_count", lambda: len(gpus))
    monkeypatch.setattr(
        torch.cuda,
        "get_device_properties",
        lambda i: types.SimpleNamespace(
            name=gpus[i][0],
            major=gpus[i][1],
            minor=gpus[i][2],
            multi_processor_count=gpus[i][3],
            **({"pci_domain_id": 0, "pci_bus_id": 0x3B + i, "pci_device_id": 0} if pci else {}),
        ),
    )
    state = nvml.state(*(nvml.gpu(i, **(usage or {}).get(i, {})) for i in range(len(gpus))))
    nvml.install(monkeypatch, tmp_path, state if usage is not None else {**state, "init": {"nvml_error": 9}})


@pytest.mark.parametrize(
    "gpus, expected",
    [
        ([], ["cpu"]),
        ([H100], ["cpu", "cuda:0"]),
        ([H100] * 8, ["cpu", "cuda:0"]),  # the old rule: cpu and cuda:0..7
        ([A100] * 4 + [H100] * 4, ["cpu", "cuda:0", "cuda:4"]),
        ([H100, H100_CUT, H100], ["cpu", "cuda:0", "cuda:1"]),
    ],
)
def test_numerics_run_on_the_cpu_and_one_gpu_of_each_model(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, gpus: list[Model], expected: list[str]
) -> None:
    _stage(monkeypatch, tmp_path, gpus, {})
    assert check_devices() == expected
    assert cuda_devices() == expected[1:]


@pytest.mark.parametrize(
    "usage, expected",
    [
        ({}, "cuda:0"),  # the healthy twin: an idle node, the first
        ({0: JOB}, "cuda:1"),  # another job on GPU 0: its idle neighbour stands for the model
        ({0: JOB, 1: {**JOB, "compute_mode": EXCLUSIVE}}, "cuda:2"),
        # a cluster that sets every GPU EXCLUSIVE_PROCESS: the mode alone is no use, another job's process is
        ({i: {"compute_mode": EXCLUSIVE, **(JOB if i == 0 else {})} for i in range(8)}, "cuda:1"),
        (
            {0: {"memory_used_mib": 600}},
            "cuda:1",
        ),  # in a container NVML lists no outside process; its context shows
        # NVML's v1 `used` counts the driver's reserve (480 MiB on an idle H100): the same on each GPU, so it cancels out
        ({i: {"memory_used_mib": 480} for i in range(8)}, "cuda:0"),
        ({i: {"memory_used_mib": 1100 if i == 0 else 480} for i in range(8)}, "cuda:1"),
        (
            {i: {"memory_used_mib": 600 if i == 0 else 480} for i in range(8)},
            "cuda:0",
        ),  # 120 MiB more: not a context
        (
            {0: {"bus": {"nvml_error": 15}}},
            "cuda:1",
        ),  # NVML cannot read GPU 0: a GPU it can read and is free comes first
        (
            {0: {"processes": [{"pid": os.getpid(), "used_mib": 600}], "memory_used_mib": 600}},
            "cuda:0",
        ),  # our own
        (
            {i: JOB if i != 5 else {**JOB, "memory_used_mib": 2000} for i in range(8)},
            "cuda:5",
        ),  # all used: least used
        (None, "cuda:0"),  # NVML cannot tell: the first
    ],
)
def test_a_gpu_no_other_process_uses_stands_for_its_model(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, usage: dict[int, dict[str, Any]] | None, expected: str
) -> None:
    _stage(monkeypatch, tmp_path, [H100] * 8, usage)
    assert check_devices() == ["cpu", expected]


def test_each_model_picks_its_own_free_gpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _stage(monkeypatch, tmp_path, [A100] * 4 + [H100] * 4, {0: JOB, 4: JOB, 5: JOB})
    assert check_devices() == ["cpu", "cuda:1", "cuda:6"]


def test_without_pci_addresses_the_first_gpu_is_used(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _stage(monkeypatch, tmp_path, [H100] * 2, {0: JOB}, pci=False)  # an old torch: nothing to match NVML with
    assert check_devices() == ["cpu", "cuda:0"]


def test_one_gpu_of_each_model_never_asks_nvml(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _stage(monkeypatch, tmp_path, [A100, H100], {})

    def read_usage(budget_s: float) -> str:
        raise AssertionError("NVML asked with nothing to choose")

    monkeypatch.setattr(devices, "read_usage", read_usage)
    assert check_devices() == ["cpu", "cuda:0", "cuda:1"] and peer_device("cuda:1") is None


def test_the_peer_is_the_next_free_gpu_of_the_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _stage(monkeypatch, tmp_path, [H100] * 8, {0: JOB, 2: JOB})
    assert check_devices()[1] == "cuda:1" and peer_device("cuda:1") == "cuda:3"


def test_no_peer_on_another_jobs_gpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Two GPUs, a job on GPU 0: GPU 1 is judged, and no state is loaded onto GPU 0."""
    _stage(monkeypatch, tmp_path, [H100] * 2, {0: {**JOB, "compute_mode": EXCLUSIVE}})
    assert check_devices() == ["cpu", "cuda:1"] and peer_device("cuda:1") is None


def test_a_gpu_this_process_already_uses_is_its_own(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """In a container whose driver lists host PIDs, this process's context shows as another PID: torch knows better."""
    _stage(
        monkeypatch,
        tmp_path,
        [H100] * 2,
        {0: {"processes": [{"pid": 98765, "used_mib": 600}], "memory_used_mib": 600}},
    )
    monkeypatch.setattr(torch._C, "_cuda_hasPrimaryContext", lambda i: i == 0, raising=False)
    assert check_devices() == ["cpu", "cuda:0"]


def test_state_roundtrip_on_an_8_gpu_node_runs_one_gpus_pairs_and_one_move(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _stage(monkeypatch, tmp_path, [H100] * 8, {})
    pairs: list[tuple[str, str, tuple[str, ...]]] = []

    def record(
        source: str,
        target: str,
        casts: list[str] | None = None,
        dtypes: tuple[str, ...] = state_roundtrip.DTYPES,
    ) -> tuple[list[Any], list[str], str]:
        pairs.append((source, target, dtypes))
        return [], [], "staged"

    monkeypatch.setattr(state_roundtrip, "roundtrip_comparisons", record)
    monkeypatch.setattr(
        devices, "on_device", lambda device: _current([], device)
    )  # a CPU torch has no cuda:0
    result = run_spec(CheckSpec("train.state_roundtrip", state_roundtrip.train_state_roundtrip, "probe"))
    assert result.status is not Status.ERROR, result.summary
    every = state_roundtrip.DTYPES
    assert pairs == [
        ("cpu", "cpu", every),
        ("cuda:0", "cuda:0", every),
        ("cpu", "cuda:0", every),
        ("cuda:0", "cpu", every),
        ("cuda:0", "cuda:1", ("float32",)),
    ]
    assert result.measured["device_pairs"][-1] == "cuda:0->cuda:1"


@contextlib.contextmanager
def _current(log: list[str], device: str) -> Iterator[None]:
    log.append(device)
    yield


def test_numerics_make_the_gpu_they_judge_the_current_device(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """autocast's bfloat16 probe and other implicit work go to torch's current device: the free GPU, not GPU 0."""
    _stage(monkeypatch, tmp_path, [H100] * 8, {0: JOB})
    current: list[str] = []
    monkeypatch.setattr(devices, "on_device", lambda device: _current(current, device))
    with numerics_mode():
        pass
    assert current == ["cuda:1"]


def test_a_rank_keeps_its_own_device_and_never_asks_nvml(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """ddp.differential's and SyncBatchNorm's ranks run under numerics_mode(device=their own): rank 3 stays on
    cuda:3 (moving it to the judged GPU would open a context there from every rank)."""
    _stage(monkeypatch, tmp_path, [H100] * 8, {0: JOB})
    current: list[str] = []
    monkeypatch.setattr(devices, "on_device", lambda device: _current(current, device))

    def read_usage(budget_s: float = 0) -> str:
        raise AssertionError("a rank asked NVML")

    monkeypatch.setattr(devices, "read_usage", read_usage)
    with numerics_mode(device="cuda:3"):
        pass
    with numerics_mode(device="cpu"):
        pass
    assert current == ["cuda:3", "cpu"]


def test_a_gpu_that_cannot_be_made_current_leaves_the_check_running(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A busy or lost GPU raises when made current: the check's own per-device handling names it, the CPU half runs."""
    _stage(monkeypatch, tmp_path, [H100] * 2, {})

    def broken(device: str) -> contextlib.AbstractContextManager[object]:
        raise RuntimeError("CUDA error: CUDA-capable device(s) is/are busy or unavailable")

    monkeypatch.setattr(devices, "on_device", broken)
    ran = []
    with numerics_mode():
        ran.append(torch.get_num_threads())
    assert ran == [1]


def test_on_device_makes_a_gpu_current_and_leaves_the_cpu_alone() -> None:
    gpu = devices.on_device("cuda:3")
    assert (
        isinstance(gpu, torch.cuda.device) and gpu.idx == 3
    )  # entering needs a GPU; the index is what it sets
    assert isinstance(devices.on_device("cpu"), contextlib.nullcontext)


@pytest.mark.parametrize(
    "module_name, check",
    [
        ("envcheck.checks.torch_compile.inductor", "compile_inductor"),
        ("envcheck.checks.torch_compile.autotune", "compile_max_autotune"),
    ],
)
def test_compile_checks_compile_once_per_gpu_model_on_that_gpu(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, module_name: str, check: str
) -> None:
    """Max-autotune times the same templates on every GPU of one model: eight times past its timeout on a node."""
    module = importlib.import_module(module_name)
    _stage(monkeypatch, tmp_path, [A100] * 4 + [H100] * 4, {0: JOB})
    monkeypatch.setattr(module, "evidence", lambda gpus: Evidence())
    current: list[str] = []
    monkeypatch.setattr(module, "on_device", lambda device: _current(current, device))
    compiled: list[str] = []

    def run_on(device: str) -> dict[str, Any]:
        compiled.append(device)
        raise RuntimeError("staged: which devices is all this test asks")

    monkeypatch.setattr(module, "run_on", run_on)
    getattr(module, check)(make_context())
    assert compiled == current == ["cpu", "cuda:1", "cuda:4"]
