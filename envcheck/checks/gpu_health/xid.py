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

from envcheck.probe.kernel_log import KMSG, read_kernel_log

MAX_EVENTS = 64  # distinct (GPU, Xid) pairs kept in a bundle



_RECORD = re.compile(r"^\d+,\d+,(\d+),[^;]*;")  # /dev/kmsg: "prio,seq,usec since boot,flags;message"



_XID = re.compile(r"NVRM: Xid \(PCI:([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})(?:\.[0-7])?\): "
                  r"(\d+),\s*(.*)")



@dataclass(frozen=True)
class XidMeaning:
    """What one Xid code means and what to do; `rank` orders findings (0 most severe), None: not the node."""

    meaning: str
    rank: int | None
    fix: str = ""



_RESET = "nvidia-smi -r -i {i} (GPU reset)"



XID_CATALOG: dict[int, XidMeaning] = {
    # Application faults: the job's own bug or its teardown, not the node (catalog: RESTART_APP, CHECK_APP/CUDA).
    13: XidMeaning("graphics engine exception (usually the application: out-of-range access, illegal "
                   "instruction)", None),
    31: XidMeaning("GPU memory page fault (usually the application: an illegal address)", None),
    43: XidMeaning("GPU stopped processing (the application's channel faulted)", None),
    45: XidMeaning("preemptive cleanup after a previous error or a killed process", None),
    # The GPU or the node.
    79: XidMeaning("GPU has fallen off the bus", 0,
                   "drain the node and reboot it (the GPU no longer answers on PCIe); check its seating, power "
                   "and cooling; RMA if it recurs"),
    154: XidMeaning("GPU recovery action changed (the driver asks for a GPU reset or a node reboot)", 0,
                    f"drain; do what the logged action says: {_RESET} or reboot the node"),
    95: XidMeaning("uncontained ECC error (every application on the GPU is affected)", 1,
                   f"drain; {_RESET} before running anything on it; RMA if it recurs"),
    48: XidMeaning("double-bit (uncorrectable) ECC error", 1,
                   f"drain; {_RESET} to retire or remap the bad memory; "
                   "nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER; RMA if it recurs"),
    64: XidMeaning("ECC page retirement or row remapping failed", 1,
                   "drain; nvidia-smi -q -d PAGE_RETIREMENT,ROW_REMAPPER; a remapping failure means RMA"),
    62: XidMeaning("internal micro-controller halt", 1, f"drain; {_RESET} or reboot; update the driver if it "
                   "recurs"),
    119: XidMeaning("GSP RPC timeout (the GPU System Processor firmware did not answer)", 1,
                    f"drain; {_RESET} or reboot; update the driver if it recurs"),
    120: XidMeaning("GSP error (the GPU System Processor firmware failed)", 1,
                    f"drain; {_RESET} or reboot; update the driver if it recurs"),
    74: XidMeaning("NVLink error", 1, f"drain; nvidia-smi nvlink -s -i {{i}} and nvidia-smi nvlink -e -i {{i}}; "
                   f"{_RESET}; check the NVLink bridges / NVSwitch fabric"),
    94: XidMeaning("contained ECC error (the application that hit it must restart)", 2,
                   f"restart the affected job; {_RESET} when convenient"),
    63: XidMeaning("ECC page retirement or row remapping recorded (takes effect at the next GPU reset)", 2,
                   f"{_RESET} when convenient; nvidia-smi -q -d PAGE_RETIREMENT,ROW_REMAPPER"),
    92: XidMeaning("high single-bit ECC error rate", 2,
                   f"nvidia-smi -q -d ECC; {_RESET}; RMA if the rate stays high"),
    61: XidMeaning("internal micro-controller breakpoint/warning", 2,
                   f"watch for Xid 62 after it; {_RESET} if the GPU hangs; update the driver"),
}



UNKNOWN_RANK = 4



def meaning_of(xid: int) -> XidMeaning:
    """The catalog entry for `xid`; codes not in the small table point to NVIDIA's catalog."""
    return XID_CATALOG.get(xid) or XidMeaning(
        "see NVIDIA's Xid catalog", UNKNOWN_RANK,
        "look the code up in https://docs.nvidia.com/deploy/xid-errors/index.html; "
        f"nvidia-smi -q -i {{i}}; {_RESET} if the GPU misbehaves")



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



def parse_xid_lines(lines: list[str]) -> list[dict[str, Any]]:
    """Xid events in kernel log lines (/dev/kmsg records, dmesg or journal lines), one entry per (GPU, code)
    with its count and the last occurrence's text and time since boot (seconds, /dev/kmsg only)."""
    events: dict[tuple[str, int], dict[str, Any]] = {}
    for line in lines:
        record = _RECORD.match(line)
        found = _XID.search(line)
        if not found:
            continue
        key = pci_key(":".join(found.group(1, 2, 3)))
        if key is None:
            continue
        xid = int(found.group(4))
        event = events.setdefault((key, xid), {"pci": key, "xid": xid, "count": 0})
        event.update(count=event["count"] + 1, text=found.group(5).strip()[:200],
                     boot_s=round(int(record.group(1)) / 1e6, 3) if record else None)
    ordered = sorted(events.values(), key=lambda e: (meaning_of(e["xid"]).rank is None, e["pci"], e["xid"]))
    return ordered[:MAX_EVENTS]



def capture_xids(path: str = KMSG) -> dict[str, Any]:
    """The kernel log's Xid events, or why there are none to tell."""
    lines, why = read_kernel_log(path)
    return {"source": path, "error": why, "xid": parse_xid_lines(lines)}

