"""A GPU's findings from the states NVML keeps for it, each read directly: the driver's recovery action (field
NVML_FI_DEV_GET_GPU_RECOVERY_ACTION), a vGPU guest's licence, InfoROM corruption, repairs waiting for a reset; and where
the kernel log's Xid 154 and NVML's current recovery action disagree, which one is followed and why.

Severities: DCGM 4.6's Driver health watch (MonitorGpuRecoveryAction: GPU_RESET, NODE_REBOOT and DRAIN_AND_RESET FAIL,
DRAIN_P2P WARN) except DRAIN_P2P, which drains here as it did for Xid 154 ("Terminate all GPU processes that conduct
peer-to-peer traffic", NVIDIA's Error Recovery and Response Flags page: a scheduler must not start new work on it);
BUS_RESET and SYSTEM_REBOOT (nvidia-ml-py 13.615) as the reset and reboot they name; InfoROM WARN (MonitorInforom). An
unlicensed vGPU drains: "an unlicensed vGPU for Compute VM ... enters a degraded state after a 20-minute grace period.
In the degraded state, compute performance is reduced to an idle level" (NVIDIA AI Enterprise, vGPU for Compute
Licensing), and the Control Panel help lists "CUDA is disabled on vGPUs that support CUDA"; neither DCGM nor gpud
judges it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# Finding codes this module emits (each one is in envcheck.cluster.finding_codes.TABLE).
RECOVERY_ACTION = "gpu.recovery_action"
VGPU_UNLICENSED = "gpu.vgpu_unlicensed"
INFOROM_CORRUPT = "gpu.inforom_corrupt"
REPAIR_PENDING = "gpu.repair_pending"

RESET = "nvidia-smi -r -i {i} (GPU reset)"


@dataclass(frozen=True)
class Action:
    """One of nvmlDeviceGpuRecoveryAction_t's values: its name, what it asks, its rank (1 and below drain), the fix."""

    name: str
    asks: str
    rank: int
    fix: str


# nvmlDeviceGpuRecoveryAction_t (nvml.h; 6 and 7 from nvidia-ml-py 13.615), named as Xid 154's text names them
ACTIONS: dict[int, Action] = {
    1: Action("GPU Reset Required", "a GPU reset", 1, f"drain, then {RESET}"),
    2: Action("Node Reboot Required", "a node reboot", 0, "drain and reboot the node"),
    3: Action(
        "Drain P2P",
        "its peer-to-peer traffic drained",
        1,
        "drain: end the processes that use peer-to-peer with it, disable UVM persistence, then read the action "
        "again (nvidia-smi -q -i {i} | grep -i recovery); it turns into one of the others",
    ),
    4: Action("Drain and Reset", "to be drained and reset", 1, f"drain; once its work ended, {RESET}"),
    5: Action(
        "Recover IMEX Domain",
        "its IMEX domain recovered",
        2,
        "restart the IMEX daemon (nvidia-imex) of the domain",
    ),
    6: Action(
        "Bus Reset", "a reset of its PCIe bus", 1, "drain; reset the GPU's PCIe bus or reboot the node"
    ),
    7: Action("System Reboot", "a system reboot", 0, "drain and reboot the node"),
}


@dataclass(frozen=True)
class StateFinding:
    """One finding of a GPU's NVML state: its code, rank, problem and fix template."""

    code: str
    rank: int
    problem: str
    fix: str


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def recovery(gpu: Mapping[str, Any], xid154: Sequence[Mapping[str, Any]]) -> tuple[list[StateFinding], str]:
    """NVML's current recovery action as a finding, and a note when the kernel log's last Xid 154 says another
    (the log records what the driver asked then; NVML reads the action now, so NVML is followed)."""
    action = _int(gpu.get("recovery_action"))
    if action is None:
        return [], ""
    last = xid154[-1] if xid154 else None
    logged = last.get("action") if last is not None else None
    now = ACTIONS.get(action)
    note = ""
    if isinstance(logged, str) and logged != (now.name if now else "None"):
        note = (
            f"the kernel log's last Xid 154 asked for '{logged}', NVML's recovery action now reads "
            f"{action} ({now.name if now else 'None'}): followed NVML, which reads the driver's state now"
        )
    if action == 0:
        return [], note
    if now is None:
        return [
            StateFinding(
                RECOVERY_ACTION,
                3,
                f"NVML's recovery action is {action}, a value these sources do not define",
                "nvidia-smi -q -i {i} | grep -i recovery",
            )
        ], note
    said = f"; {note}" if note else ""
    return [
        StateFinding(
            RECOVERY_ACTION,
            now.rank,
            f"the driver asks for {now.asks} (NVML recovery action {action}: {now.name}){said}",
            now.fix,
        )
    ], note


def licence(gpu: Mapping[str, Any]) -> list[StateFinding]:
    """A vGPU guest whose enabled licensable feature is not licensed."""
    if gpu.get("virtualization") != "vgpu":
        return []
    info = gpu.get("vgpu_license")
    if not isinstance(info, dict) or info.get("supported") is not True:
        return []
    unlicensed = [
        f
        for f in info.get("features") or []
        if isinstance(f, dict) and f.get("enabled") is True and f.get("licensed") is not True
    ]
    if not unlicensed:
        return []
    product = unlicensed[0].get("product") or f"feature {unlicensed[0].get('code')}"
    return [
        StateFinding(
            VGPU_UNLICENSED,
            1,
            f"this vGPU is not licensed ({product}: enabled, not licensed, per NVML): after NVIDIA's 20-minute "
            "grace period its compute drops to an idle level and CUDA is disabled",
            "license the VM: put the NVIDIA License System client token in /etc/nvidia/ClientConfigToken/ and "
            "restart nvidia-gridd (journalctl -u nvidia-gridd); nvidia-smi -q | grep -A3 -i license",
        )
    ]


def inforom(gpu: Mapping[str, Any]) -> list[StateFinding]:
    """NVML says the InfoROM is corrupted (NVML_ERROR_CORRUPTED_INFOROM)."""
    if gpu.get("inforom_valid") is not False:
        return []
    return [
        StateFinding(
            INFOROM_CORRUPT,
            3,
            "its InfoROM is corrupted (nvmlDeviceValidateInforom: NVML_ERROR_CORRUPTED_INFOROM): ECC and page "
            "retirement records may be lost",
            "nvidia-smi -q -d INFOROM -i {i}; have the InfoROM reflashed (the vendor's tool); RMA if it recurs",
        )
    ]


def repairs(gpu: Mapping[str, Any]) -> list[StateFinding]:
    """Channel or TPC repairs that wait for a GPU reset (nvmlDeviceGetRepairStatus)."""
    pending = gpu.get("repair_pending")
    if not isinstance(pending, dict) or "absent" in pending:
        return []
    which = [name for name in ("channel", "tpc") if pending.get(name) is True]
    if not which:
        return []
    return [
        StateFinding(
            REPAIR_PENDING,
            1,
            f"a {' and '.join(w.upper() if w == 'tpc' else w for w in which)} repair is pending: it takes effect "
            "at the next GPU reset",
            f"drain, then {RESET}",
        )
    ]
