"""envcheck.reference.devices: numerics (and compile) checks run on the CPU and the first GPU of each model, so a healthy 8-GPU node
is judged once per model, not eight times (and train.state_roundtrip's device pairs stay 4, not 81).

Staged layer: torch.cuda's device count and properties (no GPU here); torch, the checks and their loops are real.
"""

from __future__ import annotations

import types
from typing import Any

import pytest
import torch

from envcheck.checks.numerics import state_roundtrip
from envcheck.checks.torch_compile.causes import Evidence
from envcheck.core.check import CheckSpec
from envcheck.core.result import Status
from envcheck.reference import devices
from envcheck.reference.devices import check_devices, cuda_devices
from tests.helpers import make_context, run_spec

H100 = ("NVIDIA H100 80GB HBM3", 9, 0, 132)
A100 = ("NVIDIA A100-SXM4-80GB", 8, 0, 108)
H100_PCIE = ("NVIDIA H100 80GB HBM3", 9, 0, 114)  # same name, fewer SMs (a MIG slice or a cut-down card): not the same


BUS = (0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb)  # an HGX H100 board's PCI buses, in torch's (PCI) order


def _stage(monkeypatch: pytest.MonkeyPatch, gpus: list[tuple[str, int, int, int]],
           usage: dict[str, dict[str, Any]] | str = "NVML: staged, not installed") -> None:
    """Stage torch.cuda's view of `gpus` and NVML's usage record (probe.gpu_usage.read_usage's shape)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: bool(gpus))
    monkeypatch.setattr(torch.cuda, "device_count", lambda: len(gpus))
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: types.SimpleNamespace(
        name=gpus[i][0], major=gpus[i][1], minor=gpus[i][2], multi_processor_count=gpus[i][3], pci_domain_id=0,
        pci_bus_id=BUS[i], pci_device_id=0))
    monkeypatch.setattr(devices, "read_usage", lambda: usage)
    devices.held_gpus.cache_clear()


def _usage(**held: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """NVML's usage of 8 GPUs, idle (1 of 80 GiB, no process) except those named gpuN."""
    idle = {"processes": [], "memory": {"used_mib": 1024, "total_mib": 81559}, "compute_mode": "DEFAULT"}
    return {f"0000:{b:02x}:00": {"index": i, **idle, **held.get(f"gpu{i}", {})} for i, b in enumerate(BUS)}


JOB = {"processes": [{"pid": 4242, "name": "python", "used_mib": 76000}],
       "memory": {"used_mib": 77000, "total_mib": 81559}}


@pytest.mark.parametrize("usage, expected", [
    (_usage(), "cuda:0"),  # healthy idle node: the first
    (_usage(gpu0=JOB), "cuda:1"),  # another job on GPU 0: its idle neighbour stands for the model
    (_usage(gpu0=JOB, gpu1={"compute_mode": "EXCLUSIVE_PROCESS", "processes": [{"pid": 7, "name": "x"}]}), "cuda:2"),
    (_usage(**{f"gpu{i}": JOB for i in range(8)}), "cuda:0"),  # every GPU held: the first, as before
    ("NVML: Driver Not Loaded", "cuda:0"),  # NVML cannot tell: the first
])
def test_an_idle_gpu_stands_for_its_model_on_a_shared_node(monkeypatch: pytest.MonkeyPatch,
                                                           usage: dict[str, dict[str, Any]] | str,
                                                           expected: str) -> None:
    _stage(monkeypatch, [H100] * 8, usage)
    assert check_devices() == ["cpu", expected]


def test_one_gpu_of_each_model_never_asks_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    _stage(monkeypatch, [A100, H100])

    def read_usage() -> str:
        raise AssertionError("NVML asked with nothing to choose")

    monkeypatch.setattr(devices, "read_usage", read_usage)
    assert check_devices() == ["cpu", "cuda:0", "cuda:1"]


@pytest.mark.parametrize("gpus, expected", [
    ([], ["cpu"]),
    ([H100], ["cpu", "cuda:0"]),
    ([H100] * 8, ["cpu", "cuda:0"]),  # the old rule: cpu and cuda:0..7
    ([A100] * 4 + [H100] * 4, ["cpu", "cuda:0", "cuda:4"]),
    ([H100, H100_PCIE, H100], ["cpu", "cuda:0", "cuda:1"]),
])
def test_numerics_run_on_the_cpu_and_one_gpu_of_each_model(monkeypatch: pytest.MonkeyPatch,
                                                            gpus: list[tuple[str, int, int, int]],
                                                            expected: list[str]) -> None:
    _stage(monkeypatch, gpus)
    assert check_devices() == expected
    assert cuda_devices() == expected[1:]


def test_state_roundtrip_on_a_healthy_8_gpu_node_runs_the_pairs_of_one_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    _stage(monkeypatch, [H100] * 8)
    pairs: list[tuple[str, str]] = []

    def record(source: str, target: str, casts: list[str] | None = None) -> tuple[list[Any], list[str], str]:
        pairs.append((source, target))
        return [], [], "staged"

    monkeypatch.setattr(state_roundtrip, "roundtrip_comparisons", record)
    result = run_spec(CheckSpec("train.state_roundtrip", state_roundtrip.train_state_roundtrip, "probe"))
    assert result.status is not Status.ERROR, result.summary
    assert pairs == [("cpu", "cpu"), ("cuda:0", "cuda:0"), ("cpu", "cuda:0"), ("cuda:0", "cpu")]


@pytest.mark.parametrize("module_name, check", [
    ("envcheck.checks.torch_compile.inductor", "compile_inductor"),
    ("envcheck.checks.torch_compile.autotune", "compile_max_autotune"),
])
def test_compile_checks_compile_once_per_gpu_model(monkeypatch: pytest.MonkeyPatch, module_name: str,
                                                   check: str) -> None:
    """Max-autotune times the same templates on every GPU of one model: eight times past its timeout on a node."""
    import importlib

    module = importlib.import_module(module_name)
    _stage(monkeypatch, [A100] * 4 + [H100] * 4)
    monkeypatch.setattr(module, "evidence", lambda gpus: Evidence())
    compiled: list[str] = []

    def run_on(device: str) -> dict[str, Any]:
        compiled.append(device)
        raise RuntimeError("staged: which devices is all this test asks")

    monkeypatch.setattr(module, "run_on", run_on)
    getattr(module, check)(make_context())
    assert compiled == ["cpu", "cuda:0", "cuda:4"]
