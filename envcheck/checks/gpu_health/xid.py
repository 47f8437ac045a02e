"""Xid events from the kernel log: read what /dev/kmsg holds without ever blocking, parse NVRM Xid lines, and
say what each common code means.

NVML keeps no cheap Xid history, but the driver logs every Xid as a kernel message:
`NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.` The PCI address ties it to a GPU.
Meanings and actions follow NVIDIA's Xid catalog: https://docs.nvidia.com/deploy/xid-errors/index.html
(Ampere and newer: https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from envcheck.checks.gpu_health.xid_catalog import BUCKET_RANK, BUCKETS, CATALOG, SOURCE, TRIGGER, UNUSED

# The Xid printer (src/nvidia/src/kernel/gpu/rc/kernel_rc.c, krcReportXid): "NVRM: Xid (<attr>): %d, [pid=%s,
# name=%s, ]<message>[ caused by previous Xid %d]", where <attr> is "PCI:%04x:%02x:%02x", with " GPU-I:%02u" and
# " GPU-CI:%02u" when the Xid is attributed to a MIG GPU instance / compute instance (kern_gpu_error_cont_ga100.c
# quotes "NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, Contained: CE User Channel (0x9). RST: No, D-RST: No").
# Drivers before the "PCI:" tag printed the bare address. " caused by previous Xid %d" follows Xid 45 (preemptive
# removal) when the driver knows the Xid that made it clean up the channel.
_XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})(?:\.[0-7])?"
    r"((?: GPU-C?I:\d+)*)\): (\d+),\s*(.*)"
)
_CAUSE = re.compile(r"caused by previous Xid (\d+)")
_PROCESS = re.compile(r"^pid=('?[^,]*'?), name=([^,]*), ")
# Xid 154 (gpu.c, gpuSetRecoveryAction): "GPU recovery action changed from 0x%x (%s) to 0x%x (%s)"; 0x0 is None.
_ACTION = re.compile(
    r"GPU recovery action changed from (0x[0-9a-fA-F]+) \(([^)]*)\) to (0x[0-9a-fA-F]+) \(([^)]*)\)"
)


@dataclass(frozen=True)
class XidMeaning:
    """What one Xid code means and what to do; `rank` orders findings (0 most severe), None: not the node."""

    meaning: str
    rank: int | None
    fix: str = ""


_RESET = "nvidia-smi -r -i {i} (GPU reset)"


XID_CATALOG: dict[int, XidMeaning] = {
    # Application faults: the job's own bug or its teardown, not the node (catalog: RESTART_APP, CHECK_APP/CUDA).
    13: XidMeaning(
        "graphics engine exception (usually the application: out-of-range access, illegal instruction)", None
    ),
    31: XidMeaning("GPU memory page fault (usually the application: an illegal address)", None),
    43: XidMeaning("GPU stopped processing (the application's channel faulted)", None),
    45: XidMeaning("preemptive cleanup after a previous error or a killed process", None),
    # The GPU or the node.
    79: XidMeaning(
        "GPU has fallen off the bus",
        0,
        "drain the node and reboot it (the GPU no longer answers on PCIe); check its seating, power "
        "and cooling; RMA if it recurs",
    ),
    154: XidMeaning(
        "GPU recovery action changed (the driver asks for a GPU reset or a node reboot)",
        0,
        f"drain; do what the logged action says: {_RESET} or reboot the node",
    ),
    95: XidMeaning(
        "uncontained ECC error (every application on the GPU is affected)",
        1,
        f"drain; {_RESET} before running anything on it; RMA if it recurs",
    ),
    48: XidMeaning(
        "double-bit (uncorrectable) ECC error",
        1,
        f"drain; {_RESET} to retire or remap the bad memory; "
        "nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER; RMA if it recurs",
    ),
    64: XidMeaning(
        "ECC page retirement or row remapping failed",
        1,
        "drain; nvidia-smi -q -d PAGE_RETIREMENT,ROW_REMAPPER; a remapping failure means RMA",
    ),
    62: XidMeaning(
        "internal micro-controller halt", 1, f"drain; {_RESET} or reboot; update the driver if it recurs"
    ),
    119: XidMeaning(
        "GSP RPC timeout (the GPU System Processor firmware did not answer)",
        1,
        f"drain; {_RESET} or reboot; update the driver if it recurs",
    ),
    120: XidMeaning(
        "GSP error (the GPU System Processor firmware failed)",
        1,
        f"drain; {_RESET} or reboot; update the driver if it recurs",
    ),
    # Newer than the catalogue sheet (src/common/sdk/nvidia/inc/nverror.h at 595.45.04): 173 C2C_FATAL_LINK_FAILURE,
    # 174 ROBUST_CHANNEL_RESETCHANNEL_KILL_PROCESS_SILENT, 175 MEMORY_SUBSYSTEM_ERROR (kernel_gsp.c logs a GSP RPC timeout as 175 when the memory subsystem failed, and
    # marks the GPU for reset), 176 PCIE_CORRECTABLE_ERROR_FAULT.
    173: XidMeaning(
        "chip-to-chip (C2C) link failed: the GPU lost its link to the CPU",
        0,
        "drain and reboot the node; RMA if it recurs",
    ),
    174: XidMeaning("a channel reset killed its process silently (the application's)", None),
    175: XidMeaning(
        "memory subsystem error (a GSP RPC timed out because the GPU's memory subsystem failed)",
        1,
        f"drain; {_RESET} or reboot; RMA if it recurs",
    ),
    176: XidMeaning(
        "PCIe correctable errors over the driver's threshold",
        3,
        "lspci -vv -s <address> (AER counters); reseat the GPU and its riser when convenient",
    ),
    74: XidMeaning(
        "NVLink error",
        1,
        f"drain; nvidia-smi nvlink -s -i {{i}} and nvidia-smi nvlink -e -i {{i}}; "
        f"{_RESET}; check the NVLink bridges / NVSwitch fabric",
    ),
    94: XidMeaning(
        "contained ECC error (the application that hit it must restart)",
        2,
        f"restart the affected job; {_RESET} when convenient",
    ),
    63: XidMeaning(
        "ECC page retirement or row remapping recorded (takes effect at the next GPU reset)",
        2,
        f"{_RESET} when convenient; nvidia-smi -q -d PAGE_RETIREMENT,ROW_REMAPPER",
    ),
    92: XidMeaning(
        "high single-bit ECC error rate", 2, f"nvidia-smi -q -d ECC; {_RESET}; RMA if the rate stays high"
    ),
    61: XidMeaning(
        "internal micro-controller breakpoint/warning",
        2,
        f"watch for Xid 62 after it; {_RESET} if the GPU hangs; update the driver",
    ),
}


UNKNOWN_RANK = 4
APP_REPEAT = 3  # bursts on one GPU before an application Xid (13, 31) points at the GPU (NVIDIA's workflow)
ESCALATING = {13: "WORKFLOW_XID_13", 31: "WORKFLOW_XID_31"}  # Xid 43: "The GPU remains in a healthy state"


def meaning_of(xid: int) -> XidMeaning:
    """The curated entry for `xid`, else NVIDIA's catalogue entry (description, mnemonic, resolution buckets)."""
    if xid in XID_CATALOG:
        return XID_CATALOG[xid]
    if xid in CATALOG:
        mnemonic, description, now, later = CATALOG[xid]
        if not now:
            return _no_bucket(xid, mnemonic, description)
        fix = BUCKETS[now] + (f"; if it recurs: {BUCKETS[later]}" if later and later != now else "")
        if now == "WORKFLOW_NVLINK5_ERR":  # what the number alone says; a record is decoded (xid_fields)
            description += " (each record judged by its row of the 'Xid 144-150 Decode' sheet)"
        return XidMeaning(f"{description}, {mnemonic}", BUCKET_RANK.get(now, UNKNOWN_RANK), fix)
    if xid in UNUSED:
        return XidMeaning(
            "listed as unused by NVIDIA's catalogue (deprecated, or Volta and older)",
            UNKNOWN_RANK,
            f"{BUCKETS['CONTACT_SUPPORT']}; nvidia-smi -q -i {{i}}",
        )
    return XidMeaning(
        "not in NVIDIA's Xid catalogue",
        UNKNOWN_RANK,
        f"look the code up in {SOURCE}; nvidia-smi -q -i {{i}}; {_RESET} if the GPU misbehaves",
    )


NO_BUCKET_RANK = 3  # an Xid NVIDIA's catalogue lists without a resolution bucket: a warning, never a drain
REENGAGED = 162  # PSHC_REENGAGED: a capability coming back, nothing to do


def _no_bucket(xid: int, mnemonic: str, description: str) -> XidMeaning:
    """An Xid the catalogue lists with no resolution bucket (162-172): no bucket is invented; its trigger text is the
    fix where the catalogue has one. 171/172 add details to an Xid 48, which carries the verdict."""
    said = f"{description}, {mnemonic}; NVIDIA's catalogue gives it no resolution bucket"
    if xid == REENGAGED:
        return XidMeaning(said, None)
    fix = TRIGGER.get(xid) or f"nvidia-smi -q -i {{i}}; {BUCKETS['CONTACT_SUPPORT']} if it recurs"
    return XidMeaning(said, NO_BUCKET_RANK, fix)


def escalated(xid: int, bursts: int) -> XidMeaning | None:
    """An application Xid repeating on one GPU in APP_REPEAT bursts or more: NVIDIA's workflow suspects the GPU."""
    if xid not in ESCALATING or bursts < APP_REPEAT:
        return None
    return XidMeaning(
        f"{meaning_of(xid).meaning}, repeating on this GPU ({bursts} bursts): possibly the GPU, "
        "not the application",
        2,
        f"drain; dcgmi diag -r 3 -i {{i}} (NVIDIA: "
        f"{BUCKETS[ESCALATING[xid]]}); field diagnostics if DCGM passes",
    )


def pci_key(address: str) -> str | None:
    """'0000:3b:00' for NVML's '00000000:3B:00.0' or the log's '0000:3b:00' (domain:bus:device); None if
    unparsable."""
    parts = address.strip().split(":")
    if len(parts) != 3:
        return None
    try:
        return f"{int(parts[0], 16):04x}:{int(parts[1], 16):02x}:{int(parts[2].split('.')[0], 16):02x}"
    except ValueError:
        return None


def parse_xid(text: str) -> dict[str, Any] | None:
    """One Xid record's fields: pci (key), xid, text (the message after any pid/name), mig (the instance tag),
    cause (the earlier Xid it names), action (Xid 154's new recovery action); None when `text` is no Xid."""
    found = _XID.search(text)
    if not found or (key := pci_key(":".join(found.group(1, 2, 3)))) is None:
        return None
    message = found.group(6).strip()
    process = _PROCESS.match(message)
    if process:
        message = message[process.end() :]
    event: dict[str, Any] = {"pci": key, "xid": int(found.group(5)), "text": message[:200]}
    if found.group(4).strip():
        event["mig"] = found.group(4).strip()
    cause = _CAUSE.search(message)
    if cause:
        event["cause"] = int(cause.group(1))
    action = _ACTION.search(message)
    if action:
        event["action"] = action.group(4).strip()
        event["action_code"] = int(action.group(3), 16)
    return event
