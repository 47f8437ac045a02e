"""GPU inventory and facts keep every field they can read; torch devices map to NVML by UUID only.

No GPU here: NVML is the one NVML fake (tests/staging/nvml.py: a 2-GPU host, one with MIG), and one call is made
to raise NVML's error, as a real NVML call does.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from envcheck.probe import inventory as gpu_inventory
from envcheck.probe.facts import torch_facts
from envcheck.probe.system import is_absent
from tests.staging import nvml

UUID0 = "GPU-aaaaaaaa-0000-0000-0000-000000000000"
UUID1 = "GPU-bbbbbbbb-1111-1111-1111-111111111111"
MIG1 = "MIG-cccccccc-2222-2222-2222-222222222222"


# Where a failing call's answer lives in the one NVML fake's state: the system's, or each GPU's.
FIELD_OF = {
    "nvmlSystemGetDriverVersion": "driver",
    "nvmlDeviceGetCudaComputeCapability": "compute_capability",
}


def _fake_nvml(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, failing: str | None = None) -> ModuleType:
    """GPU 0: plain H100; GPU 1: an A100 in MIG mode with one slice. `failing` names the call that raises NVML's
    Unknown Error. Strings come as bytes, as older nvidia-ml-py returned them."""
    error = {"nvml_error": 999}
    gpus = [
        nvml.gpu(
            0,
            name="NVIDIA H100 80GB HBM3",
            memory_total_mib=80 * 1024,
            compute_capability=[9, 0],
            uuid=UUID0,
            mig=None,
        ),  # None: MIG mode is Not Supported, as on a GPU without MIG
        nvml.gpu(
            1,
            name="NVIDIA A100-SXM4-40GB",
            memory_total_mib=80 * 1024,
            compute_capability=[8, 0],
            uuid=UUID1,
            mig=True,
            mig_devices=[{"uuid": MIG1, "memory_total_mib": 5 * 1024}],
        ),
    ]
    top: dict[str, Any] = {"driver": "580.65.06", "driver_cuda": 13000, "bytes": True}
    key = FIELD_OF.get(failing or "")
    if key == "driver":
        top["driver"] = error
    elif key:
        for gpu in gpus:
            gpu[key] = error
    return nvml.install(monkeypatch, tmp_path, nvml.state(*gpus, **top))


def test_one_failing_nvml_call_loses_only_its_field(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _fake_nvml(monkeypatch, tmp_path, failing="nvmlDeviceGetCudaComputeCapability")
    inv = gpu_inventory.nvml_inventory(torch_uuids=lambda: None)
    assert isinstance(inv, dict) and inv["source"] == "nvml"
    assert inv["driver_version"] == "580.65.06" and inv["driver_cuda"] == "13.0"
    gpu0 = inv["gpus"][0]
    assert gpu0["name"] == "NVIDIA H100 80GB HBM3" and gpu0["memory_mib"] == 80 * 1024
    assert is_absent(gpu0["compute_capability"])
    assert "nvmlDeviceGetCudaComputeCapability failed" in gpu0["compute_capability"]["absent"]
    assert gpu0["mig"] is False and "_uuid" not in gpu0  # UUIDs stay out of the report


def test_a_failing_driver_query_keeps_the_gpus(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _fake_nvml(monkeypatch, tmp_path, failing="nvmlSystemGetDriverVersion")
    inv = gpu_inventory.nvml_inventory(torch_uuids=lambda: None)
    assert isinstance(inv, dict) and is_absent(inv["driver_version"]) and len(inv["gpus"]) == 2


def test_torch_devices_map_to_nvml_by_uuid_including_mig_and_unknown_otherwise(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """torch (mocked) sees the MIG slice first, then GPU 0, then a device NVML does not list."""
    _fake_nvml(monkeypatch, tmp_path)
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
        raise RuntimeError(
            "cuDNN version incompatibility: PyTorch was compiled  against (9, 10, 2) but found "
            "runtime version (9, 1, 0)."
        )

    monkeypatch.setattr(torch.backends.cudnn, "version", raises)
    facts = torch_facts()
    assert facts["version"] == torch.__version__
    assert "cuDNN version incompatibility" in facts["cudnn_loaded"]["absent"]


def test_one_failing_facts_section_keeps_the_others(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from envcheck.probe import facts

    pynvml = nvml.install(monkeypatch, tmp_path, nvml.state())

    def broken(run: Any) -> Any:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)

    monkeypatch.setattr(facts, "gpu_inventory", broken)
    collected = facts.collect_facts()
    assert "GPU inventory failed" in collected["gpu"]["absent"]
    assert collected["torch"]["version"] and collected["platform"]["python"]
