"""An NVSwitch SXid judged per NVIDIA's SXid catalogue (sxid_catalog), whatever tags its lines carry.

The driver logs one SXid as several lines, each `nvidia-nvswitchN: SXid (PCI:...): NNNNN, <text>`
(src/common/nvswitch/kernel/inc/common_nvswitch.h, NVSWITCH_PRINT_SXID), and the text says a different thing on each:
- a tag: "Fatal, Link %02d ...", "Non-fatal, Link %02d ...", "Correctable, ..." (intr_nvswitch.h and error_nvswitch.h,
  NVSWITCH_REPORT_*; "Fatal if contained else Non-fatal" for NVSWITCH_REPORT_CONTAIN), "Fatal, ..." free texts;
- "Severity %d Engine instance %02d ..." (error_nvswitch.c, _nvswitch_dump_error_entry), 1 being
  NVSWITCH_ERROR_SEVERITY_FATAL (ctrl_dev_nvswitch.h): a second reading of the same fatality;
- "Data {...}": registers only;
- a free text of the driver's own for some numbers (SOE HALTED, ALI Training failure, thermal shutdown...).
A log may keep only some of them (a wrapped ring buffer, a grep, a line that only the Data dump reached).

The verdict follows the line's own runtime tag, the more direct source, when one is there (Fatal or Severity 1: fatal;
Non-fatal, Correctable or Severity 0: not); where NVIDIA's catalogue classes the number otherwise it says both. With no
tag, the catalogue decides: the Fabric Manager guide's class, else the tag the driver reports the number with, else
the free text's meaning (FREE). The guide's non-fatal SXids that still need action (NEEDS_ACTION) get that action.
An SXid names its NVSwitch (PCI address, port), never a GPU: the switch-port to GPU topology is not in the line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from envcheck.checks.gpu_health.driver_causes import NVSWITCH_FATAL
from envcheck.checks.gpu_health.node import GpuFinding
from envcheck.checks.gpu_health.sxid_catalog import RECOVERY, SXIDS, SXid
from envcheck.core.result import FaultClass

# Finding codes this module emits (each one is in envcheck.cluster.finding_codes.TABLE).
NVSWITCH_RESET = "nvswitch.reset_required"
NVSWITCH_WARNING = "nvswitch.warning"

_LINK = re.compile(r"^(?:Fatal|Non-fatal|Correctable), Link (\d+)")
_TAGS = ("Fatal", "Non-fatal", "Correctable", "Severity 1", "Severity 0", "Data")
FATAL_FIX = (
    "drain; restart nvidia-fabricmanager; reset the GPUs and NVSwitches (nvidia-smi -r) or reboot the node; if it "
    "recurs, the baseboard's NVLink needs service"
)
HOST_FIX = "drain and reboot the node: NVIDIA's Fabric Manager guide says '{recovery}'"
RESET_FIX = (
    "drain; reset every GPU and NVSwitch (nvidia-smi -r) or reboot the node: NVIDIA's guide says '{recovery}'"
)


def line_tag(text: str) -> str:
    """What one SXid line's text (after the number) carries: one of _TAGS, or 'text' (a free text)."""
    for tag in _TAGS:
        if text.startswith(tag) and (tag != "Fatal" or text.startswith("Fatal,")):
            return tag
    return "text"


def line_detail(text: str) -> dict[str, Any]:
    """The fields of one SXid line for the kernel-log scan: its tag, its link, whether it says fatal."""
    tag = line_tag(text)
    out: dict[str, Any] = {"tag": tag, "fatal": tag in ("Fatal", "Severity 1")}
    link = _LINK.match(text)
    if link:
        out["link"] = int(link.group(1))
    return out


_RANK = {"Fatal": 0, "Non-fatal": 1, "Correctable": 1, "text": 2, "Severity 1": 3, "Severity 0": 3, "Data": 4}


def merge(entry: dict[str, Any], detail: Mapping[str, Any], text: str) -> None:
    """Fold one line of an SXid into its entry (one per switch and number): every tag seen, the links, fatal when
    any line says so, and the most telling line as `text` with its `tag` (a tag before a free text, before Severity
    and Data)."""
    tag = str(detail.get("tag"))
    entry["sxid"] = detail.get("sxid")
    entry["tags"] = sorted(set(entry.get("tags") or []) | {tag})
    if isinstance(detail.get("link"), int):
        entry["links"] = sorted(set(entry.get("links") or []) | {detail["link"]})
    entry["fatal"] = entry.get("fatal") is True or detail.get("fatal") is True
    if "text" not in entry or _RANK.get(tag, 5) <= _RANK.get(str(entry.get("tag")), 5):
        entry["text"], entry["tag"] = text, tag


@dataclass(frozen=True)
class Free:
    """What a free-text SXid means (no tag on its line): 'fatal', 'warn' or '' (informational), and why."""

    verdict: str
    meaning: str


def _free(number: int, text: str) -> Free | None:
    """The free-text SXids, by what the driver does when it prints them (src/common/nvswitch/kernel, 595.45.04)."""
    if number == 10004:  # therm_ls10.c/therm_lr10.c: thermal slowdown engaged, or PMGR OVERT "Shutting Down"
        if "Shutting Down" in text:
            return Free("fatal", "the NVSwitch reached its over-temperature threshold and shut down")
        return Free("warn", "the NVSwitch is thermally slowed down (its links run in a thermal mode)")
    if number in (10005, 28002, 28004):  # the end of a thermal event
        return Free("", "a thermal event ended")
    if number == 10006:  # therm_*.c: "TSENSE OVERT Threshold reached. Shutting Down"
        return Free("fatal", "the NVSwitch reached its over-temperature threshold and shut down")
    if number in (
        10007,
        10008,
        10009,
    ):  # ls10.c: "Fatal, IO failure / Firmware initialization failure / recovery"
        return Free("fatal", "the NVSwitch's firmware or I/O failed")
    if number == 10010:  # ls10: TNVL (trusted NVLink) register writes refused
        return Free("warn", "a TNVL (confidential-computing NVLink) operation failed")
    if number == 25010:  # link_ls10.c: ALI link training failed on the port (the GPU side logs Xid 136)
        return Free("fatal", "a port's NVLink did not train: that link is down")
    if 26001 <= number <= 26008:  # soe_*.c, flcn_ls10.c: the switch's SOE micro-controller failed or halted
        return Free("fatal", "the NVSwitch's SOE micro-controller failed or halted")
    if 27001 <= number <= 27007:  # cci_*.c: an optical/cable module of the switch failed
        return Free("fatal", "a cable or transceiver module of the NVSwitch failed: its links are down")
    if number == 28001:
        return Free("warn", "an OSFP module reached its thermal warning")
    if number in (28003, 28005):
        return Free("fatal", "an OSFP module reached its thermal limit: its links are shut down")
    return None


# The guide's non-fatal SXids that still need action: (rank class, the guide's recovery).
NEEDS_ACTION = {
    11004: "warn",  # Ingress invalid ACL: validate the partition routing, restart the guest VM
    12028: "warn",  # egress non-posted PRIV error: restart the guest VM
    20012: "warn",  # broken/inconsistent connection: check the link's mechanical connections
    19084: "reset",  # AN1 heartbeat timeout: reset all GPUs and all NVSwitches
}


@dataclass(frozen=True)
class Judgement:
    """'fatal', 'reset' or 'warn', the code, why (which source says so), and the fix."""

    verdict: str
    code: str
    why: str
    fix: str


def catalogue_class(row: SXid | None) -> str:
    """'fatal', 'nonfatal' or '' (undecided: fatal only if contained, differs by chip, or not classed) from NVIDIA's
    guide, else the tag the driver reports the number with."""
    if row is None:
        return ""
    if row.fm_class in ("fatal (port/partition)", "always fatal"):
        return "fatal"
    if row.fm_class == "non-fatal":
        return "nonfatal"
    return row.tag_class if row.tag_class in ("fatal", "nonfatal") else ""


def _fatal(row: SXid | None, why: str) -> Judgement:
    if row is not None and row.fm_class == "always fatal":
        return Judgement("fatal", NVSWITCH_FATAL, why, HOST_FIX.format(recovery=row.recovery))
    return Judgement("fatal", NVSWITCH_FATAL, why, FATAL_FIX)


def judge(number: int, tags: set[str], text: str) -> Judgement | None:
    """The verdict on one SXid (its number, every tag its lines carried, its most telling line); None: nothing to
    do."""
    row = SXIDS.get(number)
    listed = catalogue_class(row)
    guide = f"NVIDIA's Fabric Manager guide lists it {row.fm_class}" if row and row.fm_class else ""
    fatal_tag = next((t for t in ("Fatal", "Severity 1") if t in tags), None)
    other_tag = next((t for t in ("Non-fatal", "Correctable", "Severity 0") if t in tags), None)
    if fatal_tag:
        why = f"its line says {fatal_tag}"
        if listed == "nonfatal":
            why += f"; {guide or 'the driver reports it non-fatal'}: the line's own tag is followed"
        return _fatal(row, why)
    action = NEEDS_ACTION.get(number)
    if row is not None and action:
        said = f"its line says {other_tag}" if other_tag else "its lines carry no tag"
        why = f"{said}; {guide or 'non-fatal'}, but the guide still asks: {row.recovery}"
        if action == "reset":
            return Judgement("reset", NVSWITCH_RESET, why, RESET_FIX.format(recovery=row.recovery))
        return Judgement("warn", NVSWITCH_WARNING, why, row.recovery)
    if other_tag:
        if listed == "fatal":
            why = (
                f"its line says {other_tag}; {guide or 'the driver reports it fatal'}, when the error is contained: "
                "the line's own tag is followed"
            )
            return Judgement("warn", NVSWITCH_WARNING, why, "nvidia-smi nvlink -s; watch for it to recur")
        return None
    free = _free(number, text) if (row is None or row.free_text) else None
    if free is not None:
        why = f"{free.meaning} (its line is the driver's own text, no tag)"
        if free.verdict == "fatal":
            return _fatal(row, why)
        return Judgement("warn", NVSWITCH_WARNING, why, RECOVERY["COOL"]) if free.verdict else None
    untagged = "no line of it carries a tag (only its Data or free-text lines were logged or kept)"
    if listed == "fatal":
        return _fatal(row, f"{untagged}; {guide or 'the driver reports it Fatal'}")
    if listed == "nonfatal":
        return None
    known = (
        f"the driver reports it '{row.driver_tag}'"
        if row and row.driver_tag
        else "NVIDIA's lists give it no class"
    )
    if row is None:
        known = "not an SXid of the driver's list (ctrl_dev_nvswitch.h, 595.45.04)"
    return Judgement(
        "warn", NVSWITCH_WARNING, f"{untagged}; {known}: fatal or not cannot be told", "nvidia-smi nvlink -s"
    )


def sxid_finding(entry: Mapping[str, Any], whole_node: bool) -> GpuFinding | None:
    """The finding of one SXid entry (one switch, one number), or None when it needs nothing."""
    number = entry.get("sxid")
    if not isinstance(number, int):
        return None
    tags = {str(t) for t in entry.get("tags") or []}
    if not tags and entry.get("fatal") is True:  # a bundle written before the tags were kept
        tags = {"Fatal"}
    text = str(entry.get("text") or "")
    judged = judge(number, tags, text.split(f"{number:05d}, ", 1)[-1])
    if judged is None:
        return None
    row = SXIDS.get(number)
    name = f" {row.fm_name or row.name}" if row else ""
    switch = f"NVSwitch PCI {entry.get('pci')}.0" if entry.get("pci") else "an NVSwitch"
    links = entry.get("links")
    ports = f" on port(s) {', '.join(str(n) for n in links)}" if isinstance(links, list) and links else ""
    what = {
        "fatal": "the NVLink fabric the node's GPUs share is degraded",
        "reset": "the NVLink fabric needs every GPU and NVSwitch reset",
        "warn": "a warning",
    }[judged.verdict]
    drains = judged.verdict in ("fatal", "reset")
    return GpuFinding(
        f"SXid {number}{name}{ports} ({entry.get('count', 1)}x): {what}: {judged.why}; kernel log: {text}",
        judged.fix,
        FaultClass.NODE,
        code=judged.code,
        rank=(1 if whole_node else 3)
        if drains
        else 3,  # given some GPUs: whether this job crosses the switch?
        gpu=switch,
        who=switch,
    )
