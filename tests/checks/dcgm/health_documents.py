"""`dcgmi health -c -j` output: each document as DCGM's writer wrote it in one version, or verbatim as a public
report shows it.

Staged: all of it (no GPU, driver or DCGM exists here), except the verbatim records. The writers are re-implemented
from NVIDIA/DCGM's sources, operation for operation:
- `report_24`: dcgmi/Health.cpp at v2.4.7-v4.6.0 (GenerateOutputFromResponse, HandleOneEntity,
  AppendSystemIncidents, AddErrorMessage), v4.5.3+ with the "ConnectX system" label;
- `report_21`: the inline loop of Health::CheckWatches at v2.1.4 and v2.3.4 (its entity key is the health value,
  and an entity's last system row is never written);
- both through DcgmiOutputBoxer's JSON (dcgmi/DcgmiOutput.cpp, .h: `children`, `value`, `overflow`) and jsoncpp's
  toStyledString (src/lib_json/json_writer.cpp, BuiltStyledStreamWriter, 1.8.4-1.9.6: keys sorted, tab indents,
  `"key" : ` then a new line before an object or array, every array one item a line, a final newline).
`wrap_24` reproduces the chunks DCGM's own unit test pins (dcgmi/tests/HealthTests.cpp@v4.6.0,
"Health::GenerateOutputFromResponse"), checked in test_health_doc. Messages are DCGM's formats (dcgmlib/dcgm_errors.h
`*_MSG`) filled in, a space and the `*_NEXT` step (common/DcgmError.h SetFullError), as DcgmHealthWatch.cpp builds
them.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

# dcgmHealthSystems_t (dcgmlib/dcgm_structs.h) and dcgmi's label for each (Health::HelperSystemToString).
PCIE, NVLINK, PMU, MCU, MEM, SM, INFOROM, THERMAL, POWER, DRIVER = (1 << b for b in range(10))
NVSWITCH_NONFATAL, NVSWITCH_FATAL, CONNECTX, ALL = 0x400, 0x800, 0x1000, 0xFFFFFFFF
LABEL = {
    PCIE: "PCIe system",
    NVLINK: "NVLINK system",
    PMU: "PMU system",
    MCU: "MCU system",
    MEM: "Memory system",
    SM: "SM system",
    INFOROM: "InfoROM system",
    THERMAL: "Thermal system",
    POWER: "Power system",
    DRIVER: "Driver",
    CONNECTX: "ConnectX system",
}
PASS, WARN, FAIL = 0, 10, 20  # dcgmHealthWatchResults_t
WORD = {PASS: "Healthy", WARN: "Warning", FAIL: "Failure"}
# dcgm_field_entity_group_t and DcgmFieldsGetEntityGroupString's labels.
FE_NONE, FE_GPU, FE_SWITCH, FE_CPU, FE_CONNECTX = 0, 1, 3, 7, 9
GROUP = {FE_NONE: "None", FE_GPU: "GPU", FE_SWITCH: "Switch", FE_CPU: "CPU", FE_CONNECTX: "ConnectX"}


class Incident(NamedTuple):
    """One dcgmIncidentInfo_t: the entity, the system, DCGM's health result and error.msg."""

    entity: int
    system: int
    health: int
    msg: str
    group: int = FE_GPU


def styled(value: Any) -> str:
    """`value` as jsoncpp's Value::toStyledString writes it (StreamWriterBuilder defaults)."""

    def write(v: Any, indent: str) -> str:
        if isinstance(v, dict) and v:
            members = [
                f"\n{indent}\t{json.dumps(k)} : " + write(v[k], indent + "\t").lstrip(" ") for k in sorted(v)
            ]
            return f"\n{indent}{{" + ",".join(members) + f"\n{indent}}}"
        if isinstance(v, list) and v:
            items = [f"\n{indent}\t{write(item, indent + chr(9)).lstrip()}" for item in v]
            return f"\n{indent}[" + ",".join(items) + f"\n{indent}]"
        if isinstance(v, dict):
            return "{}"
        if isinstance(v, list):
            return "[]"
        return "null" if v is None else json.dumps(v)

    return write(value, "").lstrip("\n") + "\n"


def wrap_24(msg: str) -> list[str]:
    """Health::AddErrorMessage (v2.4.7-v4.6.0): chunks of at most 54 characters cut at a word's end (a character
    followed by ' ', '.', ',' or '/'); the character after each cut is skipped."""
    s, size = msg.replace("\n", " "), 54
    if len(s) <= size:
        return [s]
    out, p, start = [], 0, 0
    while start < len(s):
        p += size
        if p >= len(s):
            p = len(s) - 1
        elif p != len(s) - 1:
            while s[p] != " ":
                if s[p + 1] in " .,/":
                    break
                p -= 1
            while s[p] == " ":
                p -= 1
        while start < len(s) and s[start] == " ":
            start += 1
        if start >= len(s):
            break
        out.append(s[start : p + 1])
        start = p + 2
    return out


def wrap_21(msg: str) -> list[str]:
    """The 2.1.4/2.3.4 wrap in CheckWatches: a cut only before a space, no leading spaces skipped."""
    s, size = msg.replace("\n", " "), 54
    if len(s) <= size:
        return [s]
    out, p, start = [], 0, 0
    while start < len(s):
        p += size
        if p >= len(s):
            p = len(s) - 1
        else:
            while s[p] != " ":
                if p + 1 < len(s) and s[p + 1] == " ":
                    break
                p -= 1
            while s[p] == " ":
                p -= 1
        out.append(s[start : p + 1])
        start = p + 2
    return out


def _node(tree: dict[str, Any], *path: str) -> dict[str, Any]:
    """DcgmiOutputBoxer::operator[] down `path`: json["children"][name] at each step (created null, then filled)."""
    for name in path:
        children = tree.setdefault("children", {})
        if children.get(name) is None:
            children[name] = {}
        tree = children[name]
    return tree


def _document(overall: int, body: dict[str, Any]) -> dict[str, Any]:
    return {"body": {"Overall Health": {"value": WORD[overall]}, **body}, "header": ["Health Monitor Report"]}


def _overall(incidents: list[Incident]) -> int:
    return max((i.health for i in incidents), default=PASS)  # DcgmHealthResponse::PopulateHealthResponse


def label(system: int) -> str:
    return LABEL.get(system, "Internal error")


def report_24(incidents: list[Incident]) -> str:
    """The document dcgmi 2.4.7-4.6.0 writes for these incidents (in the order the host engine produced them)."""
    body: dict[str, Any] = {}
    index = 0
    while index < len(incidents):
        first = incidents[index]
        section = body.setdefault(GROUP[first.group], {})
        entity_node = _node(section, str(first.entity))
        errors = _node(entity_node, "Errors")
        entity_health = first.health
        while (
            index < len(incidents)
            and incidents[index].entity == first.entity
            and incidents[index].group == first.group
        ):
            system, health, text = incidents[index].system, incidents[index].health, incidents[index].msg
            index += 1
            while (  # AppendSystemIncidents: the same entity and system, in a row
                index < len(incidents)
                and incidents[index].entity == first.entity
                and incidents[index].group == first.group
                and incidents[index].system == system
            ):
                text += ", " + incidents[index].msg
                health = max(health, incidents[index].health)
                index += 1
            entity_health = max(entity_health, health)
            row = _node(errors, label(system))
            row["value"] = WORD[health]
            row.setdefault("overflow", []).extend(wrap_24(text))
        entity_node["value"] = WORD[entity_health]
    return styled(_document(_overall(incidents), body))


def report_21(incidents: list[Incident]) -> str:
    """The document dcgmi 2.1.4/2.3.4 writes for these incidents (Health::CheckWatches' own loop, defects kept)."""
    body: dict[str, Any] = {}
    index, n = 0, len(incidents)
    while index < n:
        first = incidents[index]
        entity_health = first.health
        section = body.setdefault(GROUP[first.group], {})
        entity_node = _node(section, str(entity_health))  # the key is the health value, not the entity id
        entity_node.setdefault("children", {}).setdefault("Errors", None)
        while (
            index + 1 < n
            and incidents[index + 1].entity == first.entity
            and incidents[index + 1].group == first.group
        ):
            system, health, text = incidents[index].system, incidents[index].health, incidents[index].msg
            while index + 1 < n and incidents[index + 1].system == system:
                index += 1
                health = max(health, incidents[index].health)
                entity_health = max(entity_health, health)
                text += ", " + incidents[index].msg
            row = _node(entity_node, "Errors", label(system))
            row.setdefault("overflow", []).extend(wrap_21(text))
            row["value"] = WORD[health]
            index += 1
        entity_node["value"] = WORD[entity_health]
        index += 1
    return styled(_document(_overall(incidents), body))


# The verbatim healthy record: NVIDIA/DCGM#263 (2025-11-06), `dcgmi health -c -j` after `dcgmi health -s a`; the
# issue shows tabs as 8 spaces and each `"key" :` line ending in a space.
HEALTHY_263 = (
    '{\n\t"body" : \n\t{\n\t\t"Overall Health" : \n\t\t{\n\t\t\t"value" : "Healthy"\n\t\t}\n\t},\n'
    '\t"header" : \n\t[\n\t\t"Health Monitor Report"\n\t]\n}\n'
)
# NVIDIA/DCGM#176 (nv-hostengine in nvcr.io/nvidia/cloud-native/dcgm:3.3.6-1-ubuntu22.04): `dcgmi health --check
# -g 1` with no watch set. Health::CheckWatches writes it with a trailing space and returns DCGM_ST_GENERIC_ERROR (-3).
NOT_ENABLED_176 = "Error: Health watches not enabled. Please enable watches. \n"
NOT_ENABLED_RC = 253
# dcgmi/Command.cpp (every tag 2.1.4-4.6.0) when no host engine answers; DCGM_ST_CONNECTION_NOT_VALID (-21).
NO_ENGINE = (
    "Error: unable to establish a connection to the specified host: localhost\n"
    "Error: Unable to connect to host engine. Host engine connection invalid/disconnected.\n"
)
NO_ENGINE_RC = 235


def version_output(version: str) -> str:
    """`dcgmi -v`'s first lines (dcgmi/Version.cpp prints DcgmBuildInfo: "Version : X" ...)."""
    return f"Version : {version}\nBuild ID : 31\nBuild Date : 2025-09-30\nBuild Type : Release\n"


# Messages as DcgmHealthWatch.cpp composes them (MSG, a space, NEXT; XID incidents add "  (triggered by XID ...)").
FIELD_DIAG = "Run a field diagnostic on the GPU."
SYSTEM_TRIAGE = "Check DCGM and system logs for errors. Reset GPU. Restart DCGM. Rerun diagnostics."
COOLING = (
    "Verify that the cooling on this machine is functional, including external, thermal material interface, fans, "
    "and any other components."
)


def dbe(gpu: int, count: int = 2) -> str:
    return f"Detected {count} volatile double-bit ECC error(s) in GPU {gpu}. Drain the GPU and reset it or reboot the node."


def pending(gpu: int) -> str:
    return f"A pending retired page has been detected in GPU {gpu}. Monitor - this GPU can still perform workload"


def recovery_reset(gpu: int) -> str:
    return (
        f"GPU {gpu} requires a reset to recover from a fault. Recovery action: 1 (GPU_RESET). "
        "Terminate all GPU processes and reset the GPU."
    )


def drain_p2p(gpu: int) -> str:
    return (
        f"GPU {gpu} requires peer-to-peer traffic to be quiesced. Recovery action: 3 (DRAIN_P2P). Terminate GPU "
        "processes conducting peer-to-peer traffic and disable UVM persistence mode. Check GPU health status again "
        "after draining."
    )


def nvlink_down(gpu: int, link: int) -> str:
    return f"GPU {gpu}'s NvLink link {link} is currently down {SYSTEM_TRIAGE}"


def nvlink_critical(gpu: int) -> str:
    return f"Detected 3 Replay NvLink errors on GPU {gpu}'s NVLink (should be 0) {FIELD_DIAG}"


def fabric_in_progress(gpu: int) -> str:
    return (
        f"GPU {gpu}: Fabric State is In Progress (2). Ensure that the FabricManager is running without errors. "
        "Fabric Manager training in progress."
    )


def pcie_replays(gpu: int) -> str:
    return (
        f"Detected more than 31 PCIe replays per minute for GPU {gpu} : 57 Reconnect PCIe card. Run system side PCIE "
        "diagnostic utilities to verify hops off the GPU board. If issue is on the board, run the field diagnostic."
    )


def thermal(gpu: int) -> str:
    """NVIDIA/DCGM#270 quotes this message from nv-hostengine's log ("Detected a WARNING in health system Thermal")."""
    return f"Detected clocks event due to thermal violation in GPU {gpu}. {COOLING}"


def thermal_2x(gpu: int) -> str:
    return f"Detected clock throttling due to thermal violation in GPU {gpu}. {COOLING}"


def power(gpu: int) -> str:
    return (
        f"Detected clocks event due to power violation in GPU {gpu}. Monitor the power conditions. This GPU can "
        "still perform workload."
    )


def inforom(gpu: int) -> str:
    return f"A corrupt InfoROM has been detected in GPU {gpu}. Flash the InfoROM to clear this corruption."


def nvswitch_nonfatal(switch: int) -> str:
    return f"Detected nonfatal errors on NvSwitch {switch} link 0 Monitor the NVSwitch. It can still perform workload."


def nvswitch_fatal(switch: int) -> str:
    return f"Detected fatal errors on NvSwitch {switch} link 0 {FIELD_DIAG}"


def fallen_off_xid79(gpu: int) -> str:
    """MonitorDevastatingXids (4.4.2+): FALLEN_OFF_BUS formatted, its NEXT, then the table's text unformatted."""
    return (
        f"GPU {gpu} has fallen off the bus Please re-seat the GPU, check for thermal and power issues, and verify "
        "that there is no outstanding bug against your driver or BIOS versions. If the issue persists, please run a "
        "field diagnostic on the GPU.  (triggered by XID 79: GPU %d has fallen off the bus)"
    )


def imex_down() -> str:
    return (
        "IMEX domain status is DOWN (unhealthy) Check IMEX installation, configuration, domain and daemon status, "
        "and network connectivity."
    )


def connectx_fatal(entity: int) -> str:
    """MonitorConnectX (4.5.3+) sets the message itself, with no next step."""
    return f"ConnectX entity Id:{entity} uncorrectable fatal errors: 0x10"
