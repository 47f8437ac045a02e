"""CUDA_VISIBLE_DEVICES naming a UUID no GPU has, and MIG's one-device-per-process rule.

Simulated: the real healthy H100 bundle (tests/checks/fixtures, from the proof run) with NVML's view staged in
it: that host's real GPU UUID (evidence proof2 host.txt), or an A100 in MIG mode. The capture side reads a
stand-in pynvml module (the one NVML fake, tests/staging/nvml.py); no GPU or NVML library is involved.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from envcheck.checks.cuda.capture import first_nvml_error, nvml_gpus
from envcheck.core.check import Context
from envcheck.evidence.bundle import validate_bundle
from envcheck.evidence.replay import explain_bundle
from tests.helpers import HEALTHY_H100
from tests.staging import nvml

H100_UUID = "GPU-f4acb5ba-fbe9-afa1-f27c-5d7a9b9f2503"  # the proof host's GPU (nvidia-smi -L)
H100 = [{"index": 0, "uuid": H100_UUID, "mig": False, "mig_devices": []}]
# MIG UUIDs in the format of https://github.com/pytorch/pytorch/issues/95784 (MIG-feee0c61-...)
SLICES = [
    "MIG-feee0c61-26ec-5616-bb59-b6d777cc4f34",
    "MIG-163816c9-1176-5817-9d3a-2b1c0f6e7a10",
    "MIG-2a7b9c1d-3e4f-5a6b-8c9d-0e1f2a3b4c5d",
]
A100_MIG = [
    {"index": 0, "uuid": "GPU-5d2f0a1e-7c3b-4e8a-9f6d-1b2c3d4e5f60", "mig": True, "mig_devices": SLICES}
]


def _explain(ctx: Context | None = None, **cuda: Any) -> list[Any]:
    bundle = json.loads(HEALTHY_H100.read_text())
    bundle["cuda"].update(cuda)
    return explain_bundle(validate_bundle(bundle), ctx or Context())


# https://github.com/pytorch/benchmark/issues/1331: "GPU with GPU-XXXX uuid is not present!" (a UUID in
# CUDA_VISIBLE_DEVICES that no GPU has); CUDA then enumerates no device and torch says nothing.
def test_a_uuid_no_gpu_has_is_named_with_the_uuids_nvml_lists() -> None:
    wrong = "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6"  # the CUDA programming guide's example UUID
    result = _explain(available=False, gpus=[], visible_devices=wrong, nvml_gpus=H100)[0]
    first = result.measured["findings"][0]
    assert result.status.value == "fail" and result.fault_class == "config"
    assert (
        first["layer"] == "CUDA_VISIBLE_DEVICES"
        and f"names {wrong}, which no GPU here has" in first["problem"]
    )
    assert H100_UUID in first["problem"]


def test_a_uuid_prefix_of_a_real_gpu_is_not_blamed() -> None:
    """CUDA accepts an unambiguous UUID prefix (CUDA programming guide, CUDA_VISIBLE_DEVICES)."""
    result = _explain(available=False, gpus=[], visible_devices="GPU-f4acb5ba", nvml_gpus=H100)[0]
    assert all(f["layer"] != "CUDA_VISIBLE_DEVICES" for f in result.measured["findings"])


def test_a_uuid_that_cannot_be_checked_says_so() -> None:
    result = _explain(
        available=False, gpus=[], visible_devices="GPU-8932f937", nvml_gpus="NVML init: Driver Not Loaded"
    )[0]
    first = result.measured["findings"][0]
    assert first["layer"] == "unknown"
    assert (
        "names GPU-8932f937, which could not be checked against this host's GPUs: NVML init"
        in first["problem"]
    )


# https://github.com/pytorch/pytorch/issues/102715 ("only a single MIG instance is visible in a process") and
# https://github.com/pytorch/pytorch/issues/130181 (MIG user guide: "a single CUDA process can only enumerate a
# single MIG device").
def test_several_mig_devices_offered_warns_that_cuda_uses_one() -> None:
    result = _explain(gpus=["NVIDIA A100-SXM4-80GB MIG 3g.40gb"], nvml_gpus=A100_MIG)[0]
    assert result.status.value == "warn" and result.fault_class == "config"
    assert "3 MIG devices are offered to this process but CUDA uses only one" in result.summary
    assert "CUDA_VISIBLE_DEVICES=MIG-<uuid>" in (result.remediation or "")


def test_one_mig_device_selected_passes() -> None:
    result = _explain(
        gpus=["NVIDIA A100-SXM4-80GB MIG 3g.40gb"], nvml_gpus=A100_MIG, visible_devices=SLICES[0]
    )[0]
    assert result.status.value == "pass"


def test_expect_gpus_above_one_under_mig_names_mig() -> None:
    devices = _explain(
        Context(expect_gpus=3), gpus=["NVIDIA A100-SXM4-80GB MIG 3g.40gb"], nvml_gpus=A100_MIG
    )[1]
    assert devices.status.value == "fail" and devices.fault_class == "config"
    assert "CUDA enumerates one MIG device per process" in devices.summary


def _nvml_state(lost: bool) -> dict[str, Any]:
    """The one NVML fake's state: GPU 0 in MIG mode with slices in slots 0 and 2 (slot 1 empty); GPU 1 lost or
    plain. Strings come as bytes, as older nvidia-ml-py returned them."""
    return nvml.state(
        nvml.gpu(
            0, uuid="GPU-aaaa", mig=True, mig_devices=[{"uuid": "MIG-0000"}, None, {"uuid": "MIG-2222"}]
        ),
        nvml.gpu(1, uuid="GPU-bbbb", mig=False, handle={"nvml_error": 15} if lost else None),
        bytes=True,
    )


@pytest.mark.parametrize("lost", [False, True])
def test_nvml_capture_reads_mig_devices_and_a_lost_gpu(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, lost: bool
) -> None:
    nvml.install(monkeypatch, tmp_path, _nvml_state(lost))
    state = nvml_gpus()
    assert isinstance(state, list)
    assert state[0] == {"index": 0, "uuid": "GPU-aaaa", "mig": True, "mig_devices": ["MIG-0000", "MIG-2222"]}
    if lost:
        assert state[1] == {"index": 1, "error": "GPU is lost"}
        assert first_nvml_error(state) == "GPU 1: GPU is lost"
    else:
        assert state[1]["mig"] is False and first_nvml_error(state) is None
