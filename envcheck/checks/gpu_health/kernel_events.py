"""The kernel log's GPU events that still apply: Xids, GPUs that fell off the bus, and what the driver said of GPUs
that failed to start, counted within the running driver instance.

Which instance an event belongs to follows from when the driver prints it (checks.gpu_health.driver_messages):
- a load begins with its start lines (the NVLink core, the NVSwitch probes, the kernel's taint notes) and ends with
  its banner, printed after every GPU was probed: the probe-time messages before a banner are that load's, whether or
  not the log kept the start lines (a grepped log, a wrapped ring buffer, a bundle from another machine lose them);
- a banner replaces the instance before it: that instance's events (an Xid 79 before a reload) no longer apply;
  a start line with no banner after it is a load that failed or is still running: the old instance is gone too;
- "GPU at PCI:...: GPU-<uuid>" is printed once per GPU object, just before its first Xid: that GPU's Xids before it
  happened to an earlier object of the GPU (a reset, a teardown at last close); what the driver said of its start
  stands;
- the driver numbers its GPU instances ("GPU6") at first open, anew after a reload: a number is tied to an address
  only by a record that says both, within one load;
- Xid 154's last recovery action per GPU is its current one ("None": nothing left to do).
The cursor (the last run's /dev/kmsg sequence number) and the time window apply to Xids, which are events in time.
What the driver said of a GPU that failed to start is the state of this instance and is judged whatever the cursor.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from envcheck.checks.gpu_health.driver_messages import LOAD_AND_PROBE, DriverMessage
from envcheck.checks.gpu_health.reset_messages import RESET_AND_NVLINK, RESET_CAUSES
from envcheck.checks.gpu_health.runtime_messages import OPEN_AND_RUNTIME
from envcheck.checks.gpu_health.sxid import line_detail as sxid_line
from envcheck.checks.gpu_health.sxid import merge as sxid_merge
from envcheck.checks.gpu_health.xid import meaning_of, parse_xid, pci_key
from envcheck.checks.gpu_health.xid_fields import record_key
from envcheck.probe.log_records import Record, messages, parse_records

# every message of the driver envcheck reads, in match order
MESSAGES = (*LOAD_AND_PROBE, *OPEN_AND_RUNTIME, *RESET_AND_NVLINK)
MAX_EVENTS = 64  # distinct (GPU, Xid) pairs and driver events kept in a bundle
RECOVERED = 0  # Xid 154's action code for "None"


@dataclass
class _Event:
    kind: str  # 'xid', 'fell_off_bus' or a driver message's kind
    phase: str
    pci: str | None
    record: Record
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Instance:
    """The events of the running driver instance, the probe-time ones of a load not yet finished, and, while a
    (re)load is under way, the state the last finished load left (the log may end before the new load does)."""

    active: list[_Event] = field(default_factory=list)
    pending: list[_Event] = field(default_factory=list)
    previous: list[_Event] = field(default_factory=list)
    reloading: bool = False
    loads: int = 0

    def start(self) -> None:
        if not self.reloading:  # the first start line of a new load: the instance before it is being unloaded
            self.previous, self.pending, self.active, self.reloading = (
                self.pending + self.active,
                [],
                [],
                True,
            )

    def finish(self, failed: _Event | None = None) -> None:
        """A load ended: with its banner, or (`failed`) initialising no GPU. Its probe-time events are the state."""
        kept = self.active if self.reloading else []  # after a start line: this load's own (none, normally)
        self.active = self.pending + kept + ([failed] if failed else [])
        self.pending, self.previous, self.reloading = [], [], False
        self.loads += 1

    def add(self, event: _Event) -> None:
        (self.pending if event.phase == "probe" else self.active).append(event)

    def forget_xids(self, key: str, numbers: set[int]) -> None:
        """A GPU object was created again (a reset, a reload of the GPU): the Xids logged before it, and the resets the
        driver asked for (by its address, or by the instance `numbers` the log tied to it), are another object's.
        What the driver said of the GPU's start stands (the object exists, its init may still fail)."""
        self.active = [
            e
            for e in self.active
            if not (
                e.kind in _BEFORE_RESET
                and (e.pci == key or (e.pci is None and e.detail.get("gpu_index") in numbers))
            )
        ]

    def events(self) -> list[_Event]:
        return (self.previous if self.reloading else []) + self.pending + self.active


_BEFORE_RESET = ("xid", *RESET_CAUSES)  # what a GPU object created again (its UUID line) leaves behind
_GSP_INDEX = re.compile(r"from GPU(\d+) GSP")
# Cause lines RmInitAdapter prints before its failure line, which names the GPU (research: osinit.c's order is the
# cause's NV_PRINTF, then "GPU <address>: RmInitAdapter failed!", then "rm_init_adapter failed, device minor N").
_PLACED_BY_INIT = ("gsp_boot", "firmware_missing", "open_module_unsupported", "gsp_heartbeat", "gsp_timeout")


def _event(record: Record) -> _Event | str | None:
    """The record's event; 'start' or 'banner' for a load's markers; 'attach:<PCI key>' for a GPU's UUID line; None
    for any other record."""
    xid = parse_xid(record.flat)
    if xid is not None:
        index = _GSP_INDEX.search(xid["text"])
        if index:
            xid["gpu_index"] = int(index.group(1))
        return _Event("xid", "runtime", xid.pop("pci"), record, xid)
    found = match(record.flat)
    if found is None:
        return None
    message, m = found
    if message.phase in ("start", "banner"):
        return message.phase
    detail: dict[str, Any] = {k: v for k, v in m.groupdict().items() if v is not None}
    key = pci_key(detail.pop("pci")) if "pci" in detail else None
    if message.phase == "attach":
        return f"attach:{key}" if key else None
    if key is None and record.device:  # /dev/kmsg's dictionary names the device the message is about
        key = pci_key(record.device)
    for name in ("devices", "bar", "size_mib", "minor", "gpu_index", "seconds", "pid", "sxid"):
        if name in detail:
            detail[name] = int(detail[name])
    if message.kind == "sxid":
        detail.update(sxid_line(str(detail.pop("detail", ""))))
    return _Event(message.kind, message.phase, key, record, detail)


def match(text: str) -> tuple[DriverMessage, re.Match[str]] | None:
    """The first driver message `text` (a record's flat text) is, with its match; None for any other text."""
    if "NVRM" not in text and "nvidia" not in text and "fallen off" not in text:
        return None
    for message in MESSAGES:
        found = message.pattern.search(text)
        if found:
            return message, found
    return None


def _in_window(record: Record, after_seq: int | None, since_s: float | None) -> bool:
    if record.seq is not None and after_seq is not None and record.seq <= after_seq:
        return False
    return not (
        record.form == "kmsg"
        and record.boot_s is not None
        and since_s is not None
        and record.boot_s < since_s
    )


def scan(lines: Iterable[str], after_seq: int | None = None, since_s: float | None = None) -> dict[str, Any]:
    """{'xid': [...], 'bus': [...], 'driver': [...], 'last_seq': N, 'loads': N} from kernel-log lines of any form
    (probe.log_records): one entry per (GPU, Xid) and per (GPU, event kind), with its count, bursts (distinct
    moments), the last occurrence's text and time since boot; see the module docstring for what still applies."""
    instance = _Instance()
    last_seq = None
    indexes: dict[int, str] = {}  # the driver's GPU instance numbers the log ties to a PCI address
    unplaced: _Event | None = None  # the last event naming a GPU only by its instance number
    last: _Event | None = None
    for record in messages(parse_records(lines)):
        last_seq = record.seq if record.seq is not None else last_seq
        got = _event(record)
        if got in ("start", "banner"):  # a (re)load: the driver numbers its GPU instances anew at first open
            if got == "start":
                instance.start()
            else:
                instance.finish()
            indexes.clear()
            unplaced = last = None
        elif isinstance(got, str):
            key = got.removeprefix("attach:")
            instance.forget_xids(key, {n for n, k in indexes.items() if k == key})
        elif isinstance(got, _Event):
            if got.kind == "xid" and not _in_window(record, after_seq, since_s):
                continue
            _place(got, indexes, unplaced, last)
            unplaced = got if got.pci is None and got.kind in _PLACED_BY_INIT else unplaced
            last = got
            if got.kind == "no_devices":
                instance.finish(failed=got)
            else:
                instance.add(got)
    for e in instance.events():
        if e.pci is None and e.detail.get("gpu_index") in indexes:
            e.pci = indexes[e.detail["gpu_index"]]
    return _summary(instance.events(), last_seq, instance.loads)


def _place(event: _Event, indexes: dict[int, str], unplaced: _Event | None, last: _Event | None) -> None:
    """Learn which PCI address a GPU instance number stands for, from a record that says both (Xid 119: 'Timeout
    ... from GPU5 GSP!') or from RmInitAdapter's failure line right after its GSP line ('GPU6 RmInitAdapter: Cannot
    initialize GSP firmware RM', then 'GPU 0000:a1:00.0: RmInitAdapter failed!'), and pair rm_init_adapter's
    device minor with the RmInitAdapter line before it."""
    index = event.detail.get("gpu_index")
    if event.pci is not None and isinstance(index, int):
        indexes[index] = event.pci  # the latest: a number is freed at a GPU's shutdown and given again
    close = unplaced is not None and unplaced.pci is None and _near(unplaced.record, event.record)
    if event.kind == "init_failed" and event.pci and close and unplaced is not None:
        unplaced.pci = event.pci
        if isinstance(unplaced.detail.get("gpu_index"), int):
            indexes[unplaced.detail["gpu_index"]] = event.pci
    if (
        event.kind == "init_failed_minor"
        and last is not None
        and last.kind == "init_failed"
        and last.pci is None
        and _near(last.record, event.record)
    ):  # releases that print RmInitAdapter's failure without the GPU name it by minor on the next line
        last.detail["minor"] = event.detail["minor"]


def _near(a: Record, b: Record) -> bool:
    if a.boot_s is not None and b.boot_s is not None:
        return 0 <= b.boot_s - a.boot_s < 1.0
    return a.when == b.when


def _summary(events: list[_Event], last_seq: int | None, loads: int) -> dict[str, Any]:
    xids: dict[tuple[str | None, int, str | None], dict[str, Any]] = {}
    bus: dict[str | None, dict[str, Any]] = {}
    driver: dict[tuple[str, str | None, Any], dict[str, Any]] = {}
    moments: dict[Any, set[Any]] = {}
    for e in events:
        at = round(e.record.boot_s, 3) if e.record.boot_s is not None else None
        if e.kind == "xid":
            # records of one Xid that its own fields judge apart (an NVLink5 Xid's sheet row) are kept apart
            slot: Any = (e.pci, e.detail["xid"], record_key(e.detail["xid"], e.detail["text"]))
            entry = xids.setdefault(slot, {"pci": e.pci, "xid": e.detail["xid"], "count": 0})
            entry.update({k: v for k, v in e.detail.items() if k != "xid"})
            if (
                e.detail["xid"] == 154 and "action" not in e.detail
            ):  # a 154 without an action: keep the last one's
                entry.pop("action", None)
        elif e.kind == "fell_off_bus":
            slot = ("bus", e.pci)
            entry = bus.setdefault(e.pci, {"pci": e.pci, "count": 0})
        else:
            slot = (e.kind, e.pci, e.detail.get("minor", e.detail.get("gpu_index", e.detail.get("sxid"))))
            entry = driver.setdefault(slot, {"kind": e.kind, "pci": e.pci, "count": 0})
            if (
                e.kind == "sxid"
            ):  # one SXid logs several lines: its tags, links and most telling line together
                sxid_merge(entry, e.detail, e.record.flat[:200])
            else:
                entry.update(e.detail)
        moments.setdefault(slot, set()).add(_moment(e.record))
        text = (
            e.detail["text"]
            if e.kind == "xid"
            else entry["text"]
            if e.kind == "sxid"
            else e.record.flat[:200]
        )
        entry.update(count=entry["count"] + 1, bursts=len(moments[slot]), text=text, boot_s=at)
    recovered = [k for k, v in xids.items() if k[1] == 154 and v.get("action_code") == RECOVERED]
    for k in recovered:  # the GPU's last recovery action is None: nothing left to do
        del xids[k]
    ordered = sorted(
        xids.values(), key=lambda e: (meaning_of(e["xid"]).rank is None, e["pci"] or "", e["xid"])
    )
    return {
        "xid": ordered[:MAX_EVENTS],
        "bus": sorted(bus.values(), key=lambda b: b["pci"] or ""),
        "driver": sorted(driver.values(), key=lambda d: (d["kind"], d["pci"] or ""))[:MAX_EVENTS],
        "last_seq": last_seq,
        "loads": loads,
    }


def _moment(record: Record) -> Any:
    """The second a record was logged (a burst): since boot, else its wall stamp, else its text (all one burst)."""
    if record.boot_s is not None:
        return int(record.boot_s)
    return record.stamp or record.flat
