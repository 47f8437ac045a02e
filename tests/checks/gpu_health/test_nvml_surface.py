"""gpu.health on NVML's whole health surface: the NVLink fabric, every NVLink against the GPU's own link count, the
links' counters, the driver's recovery action (and a stale Xid 154 beside it), a vGPU guest's licence, InfoROM,
pending repairs, slowdowns that hold, a GPU drained on purpose. Each fault with its healthy twin.

What is staged: NVML (the one fake, tests/staging/nvml.py, answering with NVML's real codes; the fabric structures
are filled through ctypes.byref as the driver fills them). Everything else is real: capture's reads and its
second sample, the verdict, the bundle's shape.

Field records: the states below are those real nodes showed, as `nvidia-smi -q` printed them (nvidia-smi names
NVML's values: fabric "State" is nvmlGpuFabricState_t, "Status" the nvmlReturn_t of a completed registration,
"Health Summary" the v3 summary), each cited:
- HEALTHY_H100: NVIDIA/k8s-test-infra tests/e2e/go/assertions/nvidiasmi/testdata/hardware/qx-h100.xml (8x H100,
  580.105.08): Fabric State Completed, Status Success, CliqueId 0, all health fields N/A; 18 NVLinks active;
  GPU Recovery Action None; Virtualization Mode Pass-Through.
- Azure/azhpc-images PR #506: "State : Completed", "Status : Insufficient Resources" (NVML error 23).
- NVIDIA/gpu-operator#2511 (580.159.04): "State : In Progress", "Status : N/A"; NVIDIA/NVSentinel#889: the state
  stays "In Progress" while the fabric manager is down.
- kubernetes-sigs/dra-driver-nvidia-gpu#626: "State Completed, Status Success, CliqueId 2, Health Summary :
  Unhealthy, Bandwidth : Full".
- leptonai/gpud (fabric-manager component.go): single-GPU H200 boxes show FabricState "Not Supported" with status
  "Unknown Error": the status means nothing unless the state is completed (nvml.h).
- NVIDIA/NVSentinel#1481: DCGM 3.3.7 reported NVLINK_DOWN for all 12 links of A100 PCIe GPUs without a bridge.
- NVIDIA/DCGM#263: nvidia-smi's gpu_recovery_action "1, Reset" on a GPU while DCGM's health said Healthy.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from envcheck.checks.gpu_health.capture import capture
from envcheck.checks.gpu_health.verdict import verdict
from envcheck.core.result import Status
from tests.checks.gpu_health.gpu_states import CTX, healthy_gpu, held, judge, state
from tests.staging import nvml

NS = {"absent": "not supported"}
XID154_RESET = (
    "NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"
)


def fabric(state_: int, status: int = 0, mask: int = 0, summary: int = 0) -> dict[str, Any]:
    return {
        "version": 3,
        "state": state_,
        "status": status,
        "clique_id": 0,
        "health_mask": mask,
        "health_summary": summary,
    }


def links(count: int = 18, down: tuple[int, ...] = (), **counters: dict[str, int]) -> dict[str, Any]:
    """The capture of a GPU's NVLinks: `count` links, those in `down` inactive; counters by 'L<n>'."""
    out = []
    for n in range(count):
        entry: dict[str, Any] = {"link": n, "active": n not in down}
        entry.update({"replay": 0, "recovery": 0, "crc_flit": 0, "crc_data": 0, "ecc_data": 0})
        entry.update(counters.get(f"L{n}", {}))
        out.append(entry)
    return {"count": count, "links": out}


def codes(result: Any) -> list[str]:
    return list(result.measured.get("codes") or [])


# ---- the fabric ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "info, code, status, words",
    [
        (fabric(1), "gpu.fabric_not_started", Status.FAIL, "registration has not started"),
        (fabric(2), "gpu.fabric_in_progress", Status.WARN, "still in progress"),
        (fabric(3, status=23), "gpu.fabric_failed", Status.FAIL, "status 23: insufficient resources"),
        (fabric(3, summary=2), "gpu.fabric_degraded", Status.FAIL, "health summary 'unhealthy'"),
        (fabric(3, mask=0x1 | 0xA8), "gpu.fabric_degraded", Status.FAIL, "bandwidth degraded"),
        (fabric(3, mask=0x10 | 0x8A), "gpu.fabric_degraded", Status.FAIL, "route unhealthy"),
        (fabric(3, mask=0x5 << 8), "gpu.fabric_degraded", Status.FAIL, "insufficient NVLinks"),
        (fabric(3, summary=3), "gpu.fabric_degraded", Status.WARN, "limited capacity"),
    ],
)
def test_a_fabric_fault_is_named_from_nvml(
    info: dict[str, Any], code: str, status: Status, words: str
) -> None:
    result = judge(state(healthy_gpu(0, fabric=info)))
    assert (result.status, result.code, result.fault_class) == (status, code, "node"), result.summary
    assert words in result.summary


def test_fabric_not_started_names_what_was_read_of_the_fabric_manager() -> None:
    data = state(healthy_gpu(0, fabric=fabric(1)))
    data["daemons"] = {"nvidia-fabricmanager": {"alive": False, "pids": [], "sockets": {}}}
    assert "nvidia-fabricmanager is not running (no nv-fabricmanager process" in judge(data).summary
    data["daemons"] = {"nvidia-fabricmanager": {"alive": True, "pids": [2112], "sockets": {}}}
    assert "nvidia-fabricmanager runs (pid 2112)" in judge(data).summary
    data["daemons"] = {"nvidia-fabricmanager": {"alive": None, "pids": None, "sockets": {}}}
    assert "cannot be seen from this PID namespace" in judge(data).summary


def test_in_progress_waiting_for_a_partition_says_so() -> None:
    """Shared NVSwitch mode: GPUs stay 'In Progress' until a partition is activated (NVIDIA/gpu-driver-container
    PR #909); the partition-assigned field (health mask bits 12-13) says FALSE."""
    result = judge(state(healthy_gpu(0, fabric=fabric(2, mask=2 << 12))))
    assert result.status is Status.WARN and "no partition is assigned to it yet" in result.summary


@pytest.mark.parametrize(
    "info, why",
    [
        (fabric(3), "an HGX H100 on 580: completed, status success, no health reported"),
        (fabric(3, mask=0xAA, summary=1), "GB200: every health field FALSE (mask 0xaa), summary healthy"),
        (fabric(3, mask=0x1AA, summary=1), "GB300: configuration 'none' (correct) too"),
        (fabric(0, status=999), "single H200: state not supported, status Unknown Error (meaningless then)"),
        (NS, "a PCIe GPU: the call is not supported"),
        ({"absent": "nvmlDeviceGetGpuFabricInfoV: not in these NVML bindings"}, "old bindings: not read"),
    ],
)
def test_a_healthy_or_absent_fabric_is_no_finding(info: Any, why: str) -> None:
    assert judge(state(healthy_gpu(0, fabric=info))).status is Status.PASS, why


# ---- the links, against the GPU's own count ------------------------------------------------------------------


def test_a_link_down_of_the_gpus_own_count_drains_without_a_profile() -> None:
    result = judge(state(healthy_gpu(0, nvlink=links(down=(3, 7))), healthy_gpu(1)))
    assert (result.status, result.code) == (Status.FAIL, "gpu.nvlink_down")
    assert "2 of its 18 NVLinks are down" in result.summary and "link 3, 7" in result.summary


def test_every_link_down_where_the_node_is_wired_drains() -> None:
    """B200 with all links inactive (gpud#1085): its peers have theirs up, so its NVLinks are wired."""
    result = judge(state(healthy_gpu(0, nvlink=links(down=tuple(range(18)))), healthy_gpu(1)))
    assert result.code == "gpu.nvlink_down" and "every link" in result.summary


def test_every_link_down_on_nvswitch_board_drains_even_alone() -> None:
    data = state(healthy_gpu(0, nvlink=links(down=tuple(range(18))), fabric=NS))
    data["nvswitches"] = ["0000:05:00.0", "0000:06:00.0", "0000:07:00.0", "0000:08:00.0"]
    assert judge(data).code == "gpu.nvlink_down"


def test_pcie_cards_without_a_bridge_are_not_blamed() -> None:
    """NVIDIA/NVSentinel#1481: A100 PCIe GPUs report all 12 links inactive; no NVSwitch, no fabric, no link up."""
    pcie = {"name": "NVIDIA A100 80GB PCIe", "fabric": NS, "nvlink": links(12, down=tuple(range(12)))}
    result = judge(state(healthy_gpu(0, **pcie), healthy_gpu(1, **pcie)))
    assert result.status is Status.PASS, result.summary


def test_links_of_a_mig_gpu_are_not_judged() -> None:
    """DCGM 4.5.0: 'NVML reports links to MIG enabled GPUs as down' (bug 200682374)."""
    result = judge(state(healthy_gpu(0, mig=True, nvlink=links(down=tuple(range(18)))), healthy_gpu(1)))
    assert result.status is Status.PASS, result.summary


def test_a_gpu_without_nvlink_has_no_link_finding() -> None:
    result = judge(state(healthy_gpu(0, nvlink={"count": 0, "links": []}, fabric=NS)))
    assert result.status is Status.PASS


# ---- the counters, over capture's second sample ---------------------------------------------------------------


def test_replay_errors_growing_within_the_window_drain() -> None:
    grew = {"replay": 4, "again": {"replay": 9}, "window_s": 1.0}
    result = judge(state(healthy_gpu(0, nvlink=links(L5=grew))))
    assert (result.status, result.code) == (Status.FAIL, "gpu.nvlink_errors")
    assert "link 5: 5 new replay error(s) within 1 s" in result.summary


def test_crc_errors_at_a_hundred_per_second_drain_and_fewer_warn() -> None:
    fast = {"crc_flit": 0, "again": {"crc_flit": 250}, "window_s": 1.0}
    slow = {"crc_flit": 0, "again": {"crc_flit": 3}, "window_s": 1.0}
    assert judge(state(healthy_gpu(0, nvlink=links(L2=fast)))).status is Status.FAIL
    assert judge(state(healthy_gpu(0, nvlink=links(L2=slow)))).status is Status.WARN


def test_old_counts_with_no_new_error_warn_never_drain() -> None:
    """Counters count until reset: history, not a link failing now (where DCGM 4.5.3 fails on any count)."""
    old = {
        "replay": 12,
        "recovery": 1,
        "crc_flit": 4000,
        "again": {"replay": 12, "recovery": 1},
        "window_s": 1.0,
    }
    result = judge(state(healthy_gpu(0, nvlink=links(L1=old))))
    assert (result.status, result.code) == (Status.WARN, "gpu.nvlink_errors")
    assert "none new in the window" in result.summary


def test_a_failed_link_recovery_drains() -> None:
    result = judge(state(healthy_gpu(0, nvlink=links(L0={"recovery_failed": 1}))))
    assert result.code == "gpu.nvlink_errors" and "failed recoveries" in result.summary


# ---- the recovery action, and a stale Xid 154 -----------------------------------------------------------------


@pytest.mark.parametrize(
    "action, status, words",
    [
        (1, Status.FAIL, "a GPU reset (NVML recovery action 1: GPU Reset Required)"),
        (2, Status.FAIL, "a node reboot"),
        (3, Status.FAIL, "its peer-to-peer traffic drained"),
        (4, Status.FAIL, "to be drained and reset"),
        (5, Status.WARN, "its IMEX domain recovered"),
    ],
)
def test_nvml_recovery_action_is_a_finding_naming_it(action: int, status: Status, words: str) -> None:
    """NVIDIA/DCGM#263: the action read 'Reset' on a GPU that DCGM's health called Healthy."""
    result = judge(state(healthy_gpu(0, recovery_action=action)))
    assert (result.status, result.code) == (status, "gpu.recovery_action") and words in result.summary


def test_a_stale_xid_154_is_overruled_by_nvml_and_the_disagreement_said() -> None:
    result = judge(state(healthy_gpu(0, recovery_action=0), xid=[XID154_RESET]))
    assert result.status is Status.PASS
    note = result.measured["disagreements"][0]
    assert "Xid 154 asked for 'GPU Reset Required'" in note and "followed NVML" in note
    assert note in result.summary


def test_xid_154_and_nvml_agreeing_give_one_finding() -> None:
    result = judge(state(healthy_gpu(0, recovery_action=1), xid=[XID154_RESET]))
    assert result.measured["codes"] == ["gpu.recovery_action"] and not result.measured["disagreements"]


# ---- vGPU, InfoROM, repairs, drained ------------------------------------------------------------------------


def licence(licensed: bool) -> dict[str, Any]:
    return {
        "supported": True,
        "features": [
            {"code": 4, "product": "NVIDIA Virtual Compute Server", "enabled": True, "licensed": licensed}
        ],
    }


def test_an_unlicensed_vgpu_drains() -> None:
    result = judge(state(healthy_gpu(0, virtualization="vgpu", vgpu_license=licence(False))))
    assert (result.status, result.code) == (Status.FAIL, "gpu.vgpu_unlicensed")
    assert "20-minute grace period" in result.summary


@pytest.mark.parametrize(
    "changes",
    [
        {"virtualization": "vgpu", "vgpu_license": licence(True)},
        {"virtualization": "passthrough"},  # every cloud capture of k8s-test-infra: not a finding
        {"virtualization": "vgpu", "vgpu_license": {"supported": False, "features": []}},
    ],
)
def test_licensed_vgpus_and_passthrough_pass(changes: dict[str, Any]) -> None:
    assert judge(state(healthy_gpu(0, **changes))).status is Status.PASS


def test_a_corrupt_inforom_warns_and_a_pending_repair_drains() -> None:
    assert judge(state(healthy_gpu(0, inforom_valid=False))).code == "gpu.inforom_corrupt"
    assert judge(state(healthy_gpu(0, inforom_valid=False))).status is Status.WARN
    result = judge(state(healthy_gpu(0, repair_pending={"channel": False, "tpc": True})))
    assert (result.status, result.code) == (
        Status.FAIL,
        "gpu.repair_pending",
    ) and "TPC repair" in result.summary


def test_a_drained_gpu_missing_from_nvml_is_not_lost() -> None:
    """nvml.h: a GPU drained with nvmlDeviceModifyDrainState is no longer seen by any new NVML process."""
    data = state(healthy_gpu(0))
    data["pci_gpus"] = ["0000:3b:00.0", "0000:3c:00.0"]
    data["drained"] = {"0000:3c:00.0": True}
    result = judge(data)
    assert result.status is Status.PASS and "1 GPU(s) drained by an operator" in result.summary
    data["drained"] = {"0000:3c:00.0": False}
    assert judge(data).code == "gpu.lost"  # its twin: not drained, so lost


# ---- slowdowns: one sample is not enough ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "second, held_",
    [
        (held(0x8), True),  # still set after the window
        ({"events_again": 0x0, "ns_before": {}, "ns_after": {}, "window_s": 1.0}, False),  # a PState change
        (
            {
                "events_again": 0x0,
                "ns_before": {"hw_thermal": 10},
                "ns_after": {"hw_thermal": 900},
                "window_s": 1,
            },
            True,  # gone by the second sample, but its cumulative time grew within the window
        ),
    ],
)
def test_a_slowdown_is_judged_only_when_it_held(second: dict[str, Any], held_: bool) -> None:
    mask = 0x8 if second.get("ns_before", {}).get("hw_thermal") is None else 0x40
    result = judge(state(healthy_gpu(0, clock_events=mask, slowdown=second)))
    assert (result.code == "gpu.clocks_slowdown") is held_, result.summary


# ---- capture, through the NVML fake ---------------------------------------------------------------------------


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    def install(*gpus: dict[str, Any], **top: Any) -> None:
        nvml.install(monkeypatch, tmp_path / "nvml", nvml.state(*gpus, **top))

    return install


def _empty_log(tmp_path: Path) -> str:
    (tmp_path / "kmsg").write_text("")
    return str(tmp_path / "kmsg")


def test_capture_reads_fabric_v3_and_falls_back_to_v2_on_an_older_driver(
    fake: Callable[..., None], tmp_path: Path
) -> None:
    fake(nvml.gpu(0, fabric={"state": 3, "status": 0, "health_mask": 0xAA, "health_summary": 1}))
    got = capture(_empty_log(tmp_path))["gpus"][0]["fabric"]
    assert got == {
        "version": 3,
        "state": 3,
        "status": 0,
        "clique_id": 0,
        "health_mask": 0xAA,
        "health_summary": 1,
    }
    fake(nvml.gpu(0, fabric={"state": 2, "max_version": 2}))  # NVML_ERROR_ARGUMENT_VERSION_MISMATCH for v3
    got = capture(_empty_log(tmp_path))["gpus"][0]["fabric"]
    assert got["version"] == 2 and got["state"] == 2 and "health_summary" not in got


def test_capture_falls_back_to_the_v1_call_where_the_bindings_lack_the_versioned_one(
    fake: Callable[..., None], tmp_path: Path
) -> None:
    fake(nvml.gpu(0, fabric={"state": 1}), bindings_lack=["nvmlDeviceGetGpuFabricInfoV"])
    got = capture(_empty_log(tmp_path))["gpus"][0]["fabric"]
    assert got == {"version": 1, "state": 1, "status": 0, "clique_id": 0}


def test_capture_reads_links_below_the_gpus_own_count_and_samples_counters_again(
    fake: Callable[..., None], tmp_path: Path
) -> None:
    gpu = nvml.gpu(0, nvlinks=[1] * 12, nvlink_counters={"4": {"replay": [2, 7]}})
    fake(gpu)
    data = capture(_empty_log(tmp_path))
    info = data["gpus"][0]["nvlink"]
    assert info["count"] == 12 and len(info["links"]) == 12
    entry = info["links"][4]
    assert (entry["replay"], entry["again"]["replay"]) == (2, 7) and entry["window_s"] >= 1.0
    assert verdict(data, CTX).code == "gpu.nvlink_errors"


def test_capture_asks_nvml_whether_a_missing_gpu_was_drained(
    fake: Callable[..., None], tmp_path: Path
) -> None:
    """The bus lists two GPUs (a staged sysfs tree); NVML one; NVML's drain state names the other."""
    sysfs = tmp_path / "pci"
    for bus in ("0000:3b:00.0", "0000:3c:00.0"):
        (sysfs / bus).mkdir(parents=True)
        (sysfs / bus / "vendor").write_text("0x10de\n")
        (sysfs / bus / "class").write_text("0x030200\n")
    fake(nvml.gpu(0), drained=["0000:3c:00.0"])
    data = capture(_empty_log(tmp_path), sysfs=str(sysfs))
    assert data["drained"] == {"0000:3c:00.0": True}
    assert verdict(data, CTX).status is Status.PASS


def test_capture_reads_a_vgpu_guests_licence_and_a_corrupt_inforom(
    fake: Callable[..., None], tmp_path: Path
) -> None:
    fake(
        nvml.gpu(
            0,
            virtualization_mode=2,
            vgpu_license={"supported": True, "features": [{"code": 4, "enabled": True, "licensed": False}]},
            inforom="corrupt",
        )
    )
    data = capture(_empty_log(tmp_path))
    gpu = data["gpus"][0]
    assert gpu["virtualization"] == "vgpu" and gpu["inforom_valid"] is False
    assert gpu["vgpu_license"]["features"][0]["licensed"] is False
    assert verdict(data, CTX).measured["codes"] == ["gpu.vgpu_unlicensed", "gpu.inforom_corrupt"]
