"""GPU inventory and facts keep every field they can read; torch devices map to NVML by UUID only.

No GPU here: NVML is mocked by patching the real pynvml module's functions (a fake 2-GPU host, one with MIG),
and one call is made to raise pynvml.NVMLError, as a real NVML call does.
"""

from __future__ import annotations

import types
from typing import Any

import pytest

from envcheck.probe import inventory as gpu_inventory
from envcheck.probe.facts import torch_facts
from envcheck.probe.system import is_absent

pynvml = pytest.importorskip("pynvml")

UUID0 = "GPU-aaaaaaaa-0000-0000-0000-000000000000"
UUID1 = "GPU-bbbbbbbb-1111-1111-1111-111111111111"
MIG1 = "MIG-cccccccc-2222-2222-2222-222222222222"


def _fake_nvml(monkeypatch: pytest.MonkeyPatch, failing: str | None = None) -> None:
    """GPU 0: plain H100; GPU 1: an A100 in MIG mode with one slice. `failing` names the call that raises."""
    handles = {0: ("gpu", 0), 1: ("gpu", 1)}
    mig_handle = ("mig", 1, 0)

    def maybe_fail(name: str) -> None:
        if name == failing:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN)

    def wrap(name: str, fn: Any) -> Any:
        def call(*a: Any) -> Any:
            maybe_fail(name)
            return fn(*a)
        return call

    fake = {
        "nvmlInit": lambda: None, "nvmlShutdown": lambda: None,
        "nvmlDeviceGetCount": lambda: 2,
        "nvmlDeviceGetHandleByIndex": lambda i: handles[i],
        "nvmlDeviceGetName": lambda h: {0: b"NVIDIA H100 80GB HBM3", 1: "NVIDIA A100-SXM4-40GB"}[h[1]],
        "nvmlDeviceGetMemoryInfo": lambda h: types.SimpleNamespace(total=(5 << 30) if h[0] == "mig" else (80 << 30)),
        "nvmlDeviceGetCudaComputeCapability": lambda h: (9, 0) if h[1] == 0 else (8, 0),
        "nvmlDeviceGetUUID": lambda h: MIG1 if h[0] == "mig" else (UUID0 if h[1] == 0 else UUID1),
        "nvmlDeviceGetMaxMigDeviceCount": lambda h: 7,
        "nvmlDeviceGetMigDeviceHandleByIndex": lambda h, k: mig_handle if k == 0 else (_ for _ in ()).throw(
            pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)),
        "nvmlSystemGetDriverVersion": lambda: "580.65.06",
        "nvmlSystemGetCudaDriverVersion": lambda: 13000,
    }

    def mig_mode(h: Any) -> tuple[int, int]:
        if h[1] == 0:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return (1, 1)

    fake["nvmlDeviceGetMigMode"] = mig_mode
    for name, fn in fake.items():
        monkeypatch.setattr(pynvml, name, wrap(name, fn))


def test_one_failing_nvml_call_loses_only_its_field(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_nvml(monkeypatch, failing="nvmlDeviceGetCudaComputeCapability")
    inv = gpu_inventory.nvml_inventory(torch_uuids=lambda: None)
    assert isinstance(inv, dict) and inv["source"] == "nvml"
    assert inv["driver_version"] == "580.65.06" and inv["driver_cuda"] == "13.0"
    gpu0 = inv["gpus"][0]
    assert gpu0["name"] == "NVIDIA H100 80GB HBM3" and gpu0["memory_mib"] == 80 * 1024
    assert is_absent(gpu0["compute_capability"])
    assert "nvmlDeviceGetCudaComputeCapability failed" in gpu0["compute_capability"]["absent"]
    assert gpu0["mig"] is False and "_uuid" not in gpu0  # UUIDs stay out of the report


def test_a_failing_driver_query_keeps_the_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_nvml(monkeypatch, failing="nvmlSystemGetDriverVersion")
    inv = gpu_inventory.nvml_inventory(torch_uuids=lambda: None)
    assert isinstance(inv, dict) and is_absent(inv["driver_version"]) and len(inv["gpus"]) == 2


def test_torch_devices_map_to_nvml_by_uuid_including_mig_and_unknown_otherwise(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """torch (mocked) sees the MIG slice first, then GPU 0, then a device NVML does not list."""
    _fake_nvml(monkeypatch)
    torch_uuids = [MIG1.removeprefix("MIG-"), UUID0.removeprefix("GPU-"), "dddddddd-9999"]
    inv = gpu_inventory.nvml_inventory(torch_uuids=lambda: torch_uuids)
    assert isinstance(inv, dict)
    mig, plain, stranger = inv["torch_devices"]
    assert mig == {"torch_index": 0, "nvml_index": 1, "mig_slot": 0, "memory_mib": 5 * 1024}
    assert plain == {"torch_index": 1, "nvml_index": 0}
    assert is_absent(stranger["nvml_index"]) and "unknown" in stranger["nvml_index"]["absent"]
    assert inv["gpus"][1]["mig"] is True and inv["gpus"][1]["mig_slices"] == [{"slot": 0, "memory_mib": 5120}]


def test_facts_survive_cudnn_version_raising(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch.backends.cudnn.version() patched to raise torch's real mismatch text."""
    import torch

    def raises() -> int:
        raise RuntimeError("cuDNN version incompatibility: PyTorch was compiled  against (9, 10, 2) but found "
                           "runtime version (9, 1, 0).")

    monkeypatch.setattr(torch.backends.cudnn, "version", raises)
    facts = torch_facts()
    assert facts["version"] == torch.__version__
    assert "cuDNN version incompatibility" in facts["cudnn_loaded"]["absent"]


def test_one_failing_facts_section_keeps_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    from envcheck.probe import facts

    def broken(run: Any) -> Any:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)

    monkeypatch.setattr(facts, "gpu_inventory", broken)
    collected = facts.collect_facts()
    assert "GPU inventory failed" in collected["gpu"]["absent"]
    assert collected["torch"]["version"] and collected["platform"]["python"]
