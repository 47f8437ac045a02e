"""Xid events from the kernel log: read what /dev/kmsg holds without ever blocking, parse NVRM Xid lines, and
say what each common code means.

NVML keeps no cheap Xid history, but the driver logs every Xid as a kernel message:
`NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.` The PCI address ties it to a GPU.
Meanings and actions follow NVIDIA's Xid catalog: https://docs.nvidia.com/deploy/xid-errors/index.html
(Ampere and newer: https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html).
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from typing import Any

from envcheck.checks.gpu_health.xid_catalog import BUCKET_RANK, BUCKETS, CATALOG, SOURCE, UNUSED
from envcheck.probe.kernel_log import KMSG, read_cursor, read_kernel_log, write_cursor

MAX_EVENTS = 64  # distinct (GPU, Xid) pairs kept in a bundle


_RECORD = re.compile(r"^\d+,(\d+),(\d+),[^;]*;")  # /dev/kmsg: "prio,seq,usec since boot,flags;message"
# NVRM's load banner, e.g. "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 ...". The driver
# prints it at the END of its module init (open-gpu-kernel-modules, kernel-open/nvidia/nv.c, nvidia_init_module):
# the PCI probe of every GPU comes first, and its failures ("The NVIDIA GPU 0000:b3:00.0 ... has fallen off the
# bus", "The NVIDIA probe routine failed for 1 device(s).") are logged before the banner of the same load.
_LOAD = re.compile(r"NVRM: loading NVIDIA UNIX")
# The first line of a load, before the probe: the module's NVLink core starts (every load, e.g. "nvidia-nvlink:
# Nvlink Core is being initialized, major device number 237" in real dmesg logs), or the kernel's taint notes
# for the module being loaded.
_LOAD_START = re.compile(
    r"nvidia-nvlink: Nvlink Core is being initialized|nvidia: loading out-of-tree module|"
    r"nvidia: module (?:license|verification)"
)
# Logged when the driver initialises a GPU (at load, and again after a reset): "NVRM: GPU at PCI:0000:3b:00: GPU-..."
_GPU_INIT = re.compile(r"NVRM: GPU at PCI:([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})")
# Newer drivers, without an Xid (NVIDIA/NVSentinel#155): "NVRM: The NVIDIA GPU 0000:b3:00.0 (PCI ID: 10de:26b5)
# installed in this system has fallen off the bus and is not responding to commands."
_BUS = re.compile(
    r"NVRM: The NVIDIA GPU ([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})(?:\.[0-7])?"
    r"[^\n]*?has fallen off the bus[^\n]*"
)
_STAMP = re.compile(
    r"^\s*\[\s*([^\]]+?)\s*\]|^([A-Z][a-z]{2} +\d+ \d\d:\d\d:\d\d)"
)  # dmesg, dmesg -T, syslog


_XID = re.compile(
    r"NVRM: Xid \(PCI:([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})(?:\.[0-7])?\): "
    r"(\d+),\s*(.*)"
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
        fix = BUCKETS[now] + (f"; if it recurs: {BUCKETS[later]}" if later != now else "")
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


def parse_xid_lines(
    lines: list[str], after_seq: int | None = None, since_s: float | None = None
) -> list[dict[str, Any]]:
    """Xid events in kernel log lines (/dev/kmsg records, dmesg or journal lines), one entry per (GPU, code)
    with its count, its bursts (distinct seconds, or distinct texts without times), the last occurrence's text
    and time since boot (seconds, /dev/kmsg only). See scan() for the window."""
    events: list[dict[str, Any]] = scan(lines, after_seq, since_s)["xid"]
    return events


def scan(lines: list[str], after_seq: int | None = None, since_s: float | None = None) -> dict[str, Any]:
    """{'xid': [...], 'bus': [...], 'last_seq': N}: events counted from the later of boot, the driver's last load
    (from its first line, so the probe failures logged before its banner count) and each GPU's last
    initialisation (a reset), and only records after `after_seq` (the last run's cursor) and
    at or after `since_s` since boot (the window). Lines without a /dev/kmsg header pass the cursor and window."""
    events: dict[tuple[str, int], dict[str, Any]] = {}
    bus: dict[str, dict[str, Any]] = {}
    seconds: dict[tuple[str, int], set[Any]] = {}
    last_seq = None
    started = (
        False  # a load's first line was seen since the last banner: the probe-time lines after it are its own
    )
    for line in lines:
        record = _RECORD.match(line)
        seq, at = (int(record.group(1)), int(record.group(2)) / 1e6) if record else (None, None)
        last_seq = seq if seq is not None else last_seq
        if _LOAD_START.search(line):  # a (re)load begins: what came before is about another driver instance
            if not started:
                events.clear()
                bus.clear()
            started = True
            continue
        if _LOAD.search(
            line
        ):  # its banner: without a start line (a log that lost it), the window begins here
            if not started:
                events.clear()
                bus.clear()
            started = False
            continue
        init = _GPU_INIT.search(line)
        if init and (key := pci_key(init.group(1))):  # the GPU was (re)initialised: a reset or a reload
            for k in [k for k in events if k[0] == key]:
                del events[k]
            bus.pop(key, None)
            continue
        if (seq is not None and after_seq is not None and seq <= after_seq) or (
            at is not None and since_s is not None and at < since_s
        ):
            continue
        fell = _BUS.search(line)
        if fell and (key := pci_key(fell.group(1))):
            entry = bus.setdefault(key, {"pci": key, "count": 0})
            entry.update(
                count=entry["count"] + 1, text=fell.group(0)[:200], boot_s=round(at, 3) if at else None
            )
            continue
        found = _XID.search(line)
        if not found or (key := pci_key(":".join(found.group(1, 2, 3)))) is None:
            continue
        xid = int(found.group(4))
        event = events.setdefault((key, xid), {"pci": key, "xid": xid, "count": 0})
        text = found.group(5).strip()[:200]
        seconds.setdefault((key, xid), set()).add(int(at) if at is not None else _stamp(line))
        event.update(
            count=event["count"] + 1,
            bursts=len(seconds[(key, xid)]),
            text=text,
            boot_s=round(at, 3) if at is not None else None,
        )
    ordered = sorted(events.values(), key=lambda e: (meaning_of(e["xid"]).rank is None, e["pci"], e["xid"]))
    return {
        "xid": ordered[:MAX_EVENTS],
        "bus": sorted(bus.values(), key=lambda b: b["pci"]),
        "last_seq": last_seq,
    }


def capture_xids(
    path: str = KMSG, state_file: str | None = None, window_s: float | None = None
) -> dict[str, Any]:
    """The kernel log's Xid and fallen-off-the-bus events within the window, or why there are none to tell.

    `state_file` (ENVCHECK_XID_STATE) keeps the last run's cursor (boot id and /dev/kmsg sequence number),
    replaced atomically; `window_s` (ENVCHECK_XID_WINDOW_S) ignores records older than that many seconds."""
    state_file = state_file if state_file is not None else os.environ.get("ENVCHECK_XID_STATE") or None
    window_s = window_s if window_s is not None else _float(os.environ.get("ENVCHECK_XID_WINDOW_S"))
    lines, why = read_kernel_log(path)
    cursor = read_cursor(state_file) if state_file else None
    since = max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - window_s) if window_s else None
    found = scan(lines, cursor, since)
    out = {
        "source": path,
        "error": why,
        "xid": found["xid"],
        "bus": found["bus"],
        "window": {"after_seq": cursor, "since_s": round(since, 3) if since is not None else None},
    }
    if state_file and why is None and found["last_seq"] is not None:
        note = write_cursor(state_file, found["last_seq"])
        if note:
            out["cursor_error"] = note
    return out


def _stamp(line: str) -> str:
    """The second a dmesg/journal line was logged ('' without a time: all such lines are one burst)."""
    found = _STAMP.match(line)
    if not found:
        return ""
    stamp = found.group(1) or found.group(2)
    try:
        return str(int(float(stamp)))  # dmesg's seconds since boot
    except ValueError:
        return stamp


def _float(text: str | None) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None
