"""The finding-code rows of the driver's catalogues as the kernel log carries them: an NVLink5 Xid NVIDIA's decode
sheet cannot judge, the NVSwitch SXids beyond the fatal ones, the resets the driver asks for, and NVLink training and
fabric failures (checks.gpu_health: xid_fields, sxid, reset_messages)."""

from __future__ import annotations

from envcheck.checks.gpu_health import reset_messages as reset
from envcheck.checks.gpu_health import sxid
from envcheck.cluster.finding_codes.common_fixes import NODE
from envcheck.core.findings import Code

ROWS = [
    Code(
        "xid.<xid>.undecoded",
        "an NVLink5 Xid (144-150) whose record lacks the fields NVIDIA's 'Xid 144-150 Decode' sheet judges, or "
        "matches none of its rows, with no Xid 154 from the driver on that GPU: a warning, not a drain",
        NODE,
        "read the whole Xid record (dmesg | grep Xid) and decode its IntrInfo/errorStatus with NVIDIA's sheet; "
        "nvidia-smi -q -i <i> | grep -i -A1 recovery",
    ),
    Code(
        sxid.NVSWITCH_RESET,
        "an NVSwitch SXid for which NVIDIA's Fabric Manager guide asks to reset every GPU and NVSwitch (19084 AN1 "
        "heartbeat timeout, although its line says Non-fatal)",
        NODE,
        "drain; reset all GPUs and NVSwitches (nvidia-smi -r) or reboot the node",
    ),
    Code(
        sxid.NVSWITCH_WARNING,
        "an NVSwitch SXid that warns: non-fatal but the guide asks for action (11004, 12028, 20012), a thermal "
        "warning, a line tagged Non-fatal for a number the guide lists fatal, or an SXid whose lines carry no tag "
        "and whose class NVIDIA's lists leave open",
        NODE,
        "the action the finding quotes from NVIDIA's Fabric Manager guide; nvidia-smi nvlink -s",
    ),
    Code(
        reset.RESET_REQUIRED,
        "the driver says a GPU needs a reset: an RM assertion (GPU marked for reset, NV_ERR_RESET_REQUIRED), its PMU "
        "halted, or its RC watchdog found it locked",
        NODE,
        reset.RESET_FIX.replace("{pci}", "<pci>"),
    ),
    Code(
        reset.NVLINK_TRAINING,
        "the driver's NVLink discovery or link training failed for a GPU (post-RxDet link mask, receiver detect, "
        "ALI pre-training): NVLink peer-to-peer with it is lost",
        NODE,
        reset.RESET_CAUSES["nvlink_training"].fix.replace("{pci}", "<pci>"),
    ),
    Code(
        reset.FABRIC_PROBE,
        "a GPU's NVLink fabric registration failed (Fabric Probe failed): no NVLink peer-to-peer through the "
        "NVSwitches",
        NODE,
        reset.RESET_CAUSES["fabric_probe"].fix.replace("{pci}", "<pci>"),
    ),
]
