"""dcgm.health's verdict: each incident DCGM's health watches report, judged by DCGM's own health result.

The watch's result is DCGM's direct statement of an incident: Failure is the node's (FAIL, drains), Warning warns.
The DCGM_FR code recovered from the message (health_messages) says what it is and carries DCGM's error table
severity (dcgmErrorMeta); where that severity and the watch disagree (a pending page retirement: Warning, RESET),
the watch is followed and the result says so. An incident is named by its entity: a GPU by its DCGM id, which is
the NVML index (dcgmlib/src/DcgmCacheManager.cpp), with its PCI address; an NVSwitch, a ConnectX or the node (IMEX)
by theirs. dcgmi 2.1-2.3 writes the health value where the entity id belongs: no GPU is named from that key, only
from DCGM's own message, and the verdict rests on "Overall Health", the one value that writer prints whole.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from envcheck.checks.dcgm import error_codes
from envcheck.checks.dcgm.health_doc import WORDS, HealthDocument
from envcheck.checks.dcgm.health_messages import Message, split
from envcheck.core.result import FaultClass, Result, errored, failed, first_of, passed, warned

FAMILY = "dcgm.health"  # dcgm.health.<system>: an incident of that health-watch system
OVERALL_ONLY = "dcgm.health.overall"  # DCGM's overall health, with no incident row printed for it
UNREAD = "dcgm.health_unread"
# dcgmi's system labels (Health::HelperSystemToString) and the system each names.
SYSTEMS = {
    "PCIe system": "pcie",
    "NVLINK system": "nvlink",
    "PMU system": "pmu",
    "MCU system": "mcu",
    "Memory system": "memory",
    "SM system": "sm",
    "InfoROM system": "inforom",
    "Thermal system": "thermal",
    "Power system": "power",
    "Driver": "driver",
    "ConnectX system": "connectx",
}
# "Internal error" labels the systems HelperSystemToString has no case for; the message's code tells which.
_INTERNAL = {16: "nvswitch_nonfatal", 15: "nvswitch_fatal", 101: "xid", 120: "xid", 81: "xid", 131: "xid"}
_FAULT_SEVERITIES = (error_codes.ISOLATE, error_codes.RESET, error_codes.TRIAGE)


@dataclass(frozen=True)
class Incident:
    """One incident as read: its system, dcgmi's label, DCGM's health word, the entity and the message."""

    system: str
    label: str
    health: str
    entity: str
    message: Message
    groups: tuple[str, ...]
    gpu: str | None = None


def system_of(label: str, group: str, message: Message) -> str:
    """The health-watch system of a row: its label, or for "Internal error" the message's code (an NVSwitch's
    errors, a GPU's devastating XID under DCGM_HEALTH_WATCH_ALL)."""
    if label in SYSTEMS:
        return SYSTEMS[label]
    if group == "Switch" and message.code == 14:
        return "nvswitch_fatal"  # MonitorNvSwitchErrorCounts: a switch link Down is reported as a fatal error
    return _INTERNAL.get(message.code or -1, "xid" if message.xid else "unknown_system")


def _entity(
    group: str, key: str, old: bool, message: Message, pci: Mapping[str, str]
) -> tuple[str, str | None]:
    """How the incident's entity is named, and its GPU id when it is a GPU."""
    if group == "GPU":
        gid = message.gpu if old else key
        if gid is None:
            return (
                f"a GPU dcgmi does not identify (its 2.x writer prints the health value {key} as the key)",
                None,
            )
        where = f" ({pci[gid]})" if gid in pci else ""
        return f"GPU {gid}{where}" + (" (named by DCGM's message)" if old else ""), gid
    if group == "Switch":
        return f"NVSwitch {key}" if not old else "an NVSwitch", None
    if group == "None":
        return "the node (DCGM's global checks: IMEX)", None
    return f"{group} {key}" if not old else f"a {group} entity", None


def incidents(doc: HealthDocument, letter: str, old: bool, pci: Mapping[str, str]) -> list[Incident]:
    """Every incident one group's document prints, one per recognised message."""
    out = []
    for entity in doc.entities:
        for row in entity.systems:
            for message in split(row.text) or [Message("")]:
                name, gpu = _entity(entity.group, entity.key, old, message, pci)
                system = system_of(row.label, entity.group, message)
                out.append(Incident(system, row.label, row.health, name, message, (letter,), gpu))
    return out


def merged(found: Sequence[Incident]) -> list[Incident]:
    """One incident per entity, system and message, with every group whose check printed it."""
    by: dict[tuple[str, str, str], Incident] = {}
    for i in found:
        key = (i.entity, i.system, i.message.text)
        was = by.get(key)
        by[key] = i if was is None else Incident(**{**was.__dict__, "groups": (*was.groups, *i.groups)})
    return list(by.values())


def severity_note(i: Incident) -> str | None:
    """Where DCGM's error table rates the message's code otherwise than the watch did, the two, and which stands."""
    meta = error_codes.SEVERITY.get(i.message.code) if i.message.code is not None else None
    verdict = WORDS.get(i.health)
    if meta is None or verdict is None:
        return None
    if (verdict == "warn" and meta in _FAULT_SEVERITIES) or (
        verdict == "fail" and meta == error_codes.MONITOR
    ):
        return (
            f"the health watch says {i.health}; DCGM's error table (dcgmErrorMeta) rates DCGM_FR_{i.message.name} "
            f"{error_codes.SEVERITY_NAMES[meta].upper()}: the watch's own result is followed"
        )
    return None


def record(i: Incident) -> dict[str, Any]:
    """An incident as the result's evidence."""
    code = i.message.code
    return {
        "system": i.system,
        "label": i.label,
        "health": i.health,
        "entity": i.entity,
        "gpu": i.gpu,
        "message": i.message.text,
        "dcgm_fr": None if code is None else f"DCGM_FR_{i.message.name} ({code})",
        "next_step": i.message.next_step,
        "groups": list(i.groups),
        "severity_note": severity_note(i),
    }


# What dcgmi's "Internal error" label stands for, once the message has told which system it is.
_UNLABELLED = {
    "xid": "devastating XID (DCGM_HEALTH_WATCH_ALL)",
    "nvswitch_fatal": "NVSwitch fatal",
    "nvswitch_nonfatal": "NVSwitch non-fatal",
    "unknown_system": "of a system dcgmi does not name",
}


def line(i: Incident) -> str:
    """'DCGM health watch Driver: Failure on GPU 0 (0000:18:00): GPU 0 requires a reset ...'."""
    watch = i.label if i.label in SYSTEMS else f"{_UNLABELLED[i.system]} (dcgmi: {i.label!r})"
    return f"DCGM health watch {watch}: {i.health} on {i.entity}: {i.message.text or '(no message printed)'}"


def fix(i: Incident, letter: str) -> str:
    """DCGM's own next step, then what a failure asks of the node."""
    step = i.message.next_step.rstrip(". ")
    code = f" for DCGM_FR_{i.message.name}" if i.message.name else ""
    said = f"DCGM's next step{code}: {step}" if step else f"see DCGM's message{code}"
    if WORDS.get(i.health) != "fail":
        return f"{said} (DCGM rates it a warning: no drain)"
    out = f"{said}; drain the node until `dcgmi health -g {letter} -c` reads Healthy"
    if i.message.xid or i.system == "xid":
        out += " (DCGM keeps every XID it saw until nv-hostengine restarts: restart nvidia-dcgm after the repair)"
    return out + (f"; dcgmi diag -r 3 -i {i.gpu} for detail" if i.gpu is not None else "")


NVLINK_DOWN_CODE = 14  # DCGM_FR_NVLINK_DOWN: "GPU %u's NvLink link %d is currently down"
UNWIRED = (
    "no NVSwitch baseboard wires this node's NVLinks (none on the PCI bus, no GPU registered with a fabric, per the "
    "bus and NVML): DCGM's rule fails any link that is down, and a PCIe GPU's links without a bridge are (NVIDIA/"
    "NVSentinel#1481: DCGM 3.3.7 on A100 PCIe); the bus's and NVML's direct evidence is followed: a warning"
)


def _unwired(found: Sequence[Incident], wired: bool | None) -> tuple[list[Incident], list[Incident]]:
    """(the incidents to judge as DCGM rated them, the link-down Failures a node without wired NVLinks cannot
    have): where the bus and NVML say nothing is wired (wired is False), a link 'down' is a link that never was."""
    if wired is not False:
        return list(found), []
    down = [i for i in found if i.message.code == NVLINK_DOWN_CODE and WORDS.get(i.health) == "fail"]
    return [i for i in found if i not in down], down


def verdict(
    docs: Mapping[str, HealthDocument],
    old: bool,
    measured: dict[str, Any],
    pci: Mapping[str, str],
    wired: bool | None = None,
) -> Result:
    """The check's result from each DCGM group's document (by dcgmi's group letter); `wired` is whether the node's
    NVLinks are wired by its own evidence (None: not read)."""
    found, unwired = _unwired(
        merged([i for letter, doc in docs.items() for i in incidents(doc, letter, old, pci)]), wired
    )
    if unwired:
        measured["disagreements"] = [f"{line(i)}: {UNWIRED}" for i in unwired]
    measured["incidents"] = [record(i) for i in found]
    notes = [n for n in (severity_note(i) for i in found) if n]
    if notes:
        measured["severity_notes"] = notes
    overall = max((WORDS.get(d.overall, "unknown") for d in docs.values()), key=_rank)
    measured["overall_health"] = {letter: d.overall for letter, d in docs.items()}
    letter = next(iter(docs))
    by = {v: [i for i in found if WORDS.get(i.health, "unknown") == v] for v in ("fail", "warn", "unknown")}
    if by["fail"]:
        first = by["fail"][0]
        return failed(
            first_of([line(i) for i in by["fail"]]),
            fix(first, first.groups[0]),
            measured=measured,
            fault_class=FaultClass.NODE,
            code=f"{FAMILY}.{first.system}",
        )
    if overall == "fail" and not unwired:  # dismissed link-down rows are the incidents behind it
        return failed(
            _overall_only("Failure", old),
            _OVERALL_FIX,
            measured=measured,
            fault_class=FaultClass.NODE,
            code=OVERALL_ONLY,
        )
    if by["unknown"] or overall == "unknown":
        said = [line(i) for i in by["unknown"]] or [f"Overall Health {next(iter(docs.values())).overall!r}"]
        return errored(
            f"cannot judge: DCGM's health check gave a result word envcheck does not know: {first_of(said)}",
            measured=measured,
            code=UNREAD,
            remediation=f"read it by hand: dcgmi health -g {letter} -c",
        )
    if by["warn"] or unwired:
        first = (by["warn"] or unwired)[0]
        said = [line(i) for i in by["warn"]] + [f"{line(i)}: {UNWIRED}" for i in unwired]
        return warned(
            first_of(said),
            "nvidia-smi nvlink -s (are any links wired?); if this GPU has an NVLink bridge, reseat it"
            if first in unwired
            else fix(first, first.groups[0]),
            measured=measured,
            fault_class=FaultClass.NODE,
            code=f"{FAMILY}.{first.system}",
        )
    if overall == "warn":
        return warned(
            _overall_only("Warning", old),
            _OVERALL_FIX,
            measured=measured,
            fault_class=FaultClass.NODE,
            code=OVERALL_ONLY,
        )
    groups = ", ".join(f"-g {g}" for g in docs)
    return passed(f"DCGM's health watches (on {groups}): Healthy", measured=measured)


_OVERALL_FIX = (
    "read the incidents with DCGM's own API or a newer dcgmi: dcgmi health -g g -c; dcgmi diag -r 2"
)


def _overall_only(word: str, old: bool) -> str:
    why = (
        "this dcgmi (2.1-2.3) does not print every incident (its writer drops each entity's last system)"
        if old
        else "dcgmi printed no incident row for it"
    )
    return f"DCGM's overall health is {word}; {why}"


def _rank(word: str) -> int:
    return {"pass": 0, "warn": 1, "unknown": 2, "fail": 3}.get(word, 2)
