"""A GPU's NVLink findings from NVML: its fabric registration and health (Hopper and newer on NVSwitch systems), the
state of each of its own NVLinks (no node profile needed: the GPU's link count is NVML's), and the links' error
counters.

The rules follow NVIDIA's own health watches (DCGM 4.6, modules/health/DcgmHealthWatch.cpp) unless said otherwise:
- fabric (MonitorFabricFields; the FM status from DcgmCacheManager.cpp GetFMStatusFromStruct): not started FAIL, in
  progress WARN, completed with an error status FAIL, a health-mask bit set FAIL (route unhealthy, degraded bandwidth,
  route recovery, access-timeout recovery, an incorrect configuration); the v3 summary "unhealthy" FAIL and "limited
  capacity" WARN as gpud rates them (DCGM does not read the summary). State "not supported" (a GPU without fabric, a
  PCIe card, an H200 without NVSwitch) is no finding; nvml.h: the status "must be checked only if state returns
  complete";
- links (MonitorNVLinkStatus): a link below the GPU's count that is down FAILs where an NVSwitch baseboard wires
  every link (NVSwitches on the PCI bus, or a GPU registered with an NVLink fabric), except on a GPU in MIG mode
  ("NVML reports links to MIG enabled GPUs as down", DCGM 4.5.0+). On PCIe cards the count is the chip's, not the
  bridges': a bridged H100 PCIe pair wires 12 of 18 links and shows the other 6 inactive on a healthy node
  (HPE-Japan-Presales/e-learning gpu/h100/mgmt_gpu_on_dl380agen11.md), and a card without a bridge shows all of
  them inactive (NVIDIA/NVSentinel#1481: DCGM's NVLINK_DOWN on all 12 links of A100 PCIe GPUs). There a GPU is
  judged against the node's other GPUs of the same product, and warns when it has fewer links up (NVML does not
  know which bridges are fitted; a node profile states the count expected);
- counters (MonitorNVLink4Fields, a window of a minute): a replay or recovery error within the window FAILs, CRC
  errors at 100 or more per second FAIL ("RM has informed us that CRC errors only matter at rates of 100+ per
  second", DcgmGPUHardwareLimits.h), fewer WARN; Blackwell's failed link recoveries (field 214) FAIL. envcheck's
  window is the one-second second sample of capture; counters that only hold old errors (they count until reset)
  warn, where DCGM 4.5.3's absolute rule fails them: a count with no new error in the window is history, not a
  link failing now.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# Finding codes this module emits (each one is in envcheck.cluster.finding_codes.TABLE).
FABRIC_NOT_STARTED = "gpu.fabric_not_started"
FABRIC_IN_PROGRESS = "gpu.fabric_in_progress"
FABRIC_FAILED = "gpu.fabric_failed"
FABRIC_DEGRADED = "gpu.fabric_degraded"
NVLINK_DOWN = "gpu.nvlink_down"
NVLINK_ERRORS = "gpu.nvlink_errors"

# nvmlGpuFabricState_t (nvml.h)
NOT_SUPPORTED, NOT_STARTED, IN_PROGRESS, COMPLETED = 0, 1, 2, 3
# NVML_GPU_FABRIC_HEALTH_MASK_*: (shift, width mask, the value that means trouble, what it says)
HEALTH_BITS = (
    (0, 0x3, 1, "bandwidth degraded"),
    (2, 0x3, 1, "route recovery in progress"),
    (4, 0x3, 1, "route unhealthy"),
    (6, 0x3, 1, "access timeout recovery in progress"),
)
CONFIG_SHIFT, CONFIG_WIDTH = 8, 0xF
# NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_*: 0 not supported, 1 none (correct)
INCORRECT = {
    2: "incorrect system GUID",
    3: "incorrect chassis serial number",
    4: "no partition",
    5: "insufficient NVLinks",
    6: "incompatible GPU firmware",
    7: "invalid location",
    8: "GPU state invalid",
}
PARTITION_SHIFT, PARTITION_WIDTH, PARTITION_NOT_ASSIGNED = 12, 0x3, 2
SUMMARY_UNHEALTHY, SUMMARY_LIMITED = 2, 3
# NVML error names for a completed registration's status (nvmlReturn_t)
STATUS_NAMES = {23: "insufficient resources", 999: "unknown error", 10: "timeout", 29: "invalid state"}
CRC_FAIL_PER_S = 100.0

FM_FIX = (
    "systemctl enable --now nvidia-fabricmanager (the fabric manager of exactly the driver's version; journalctl -u "
    "nvidia-fabricmanager names its error); nvidia-smi -q | grep -A8 -i fabric"
)
FABRIC_FIX = (
    "drain; nvidia-smi -q | grep -A12 -i fabric and the fabric manager's log (/var/log/fabricmanager.log); "
    "restart nvidia-fabricmanager, then reset the GPUs (nvidia-smi -r) or reboot; check the NVLink trays and cables"
)
LINK_FIX = (
    "drain; nvidia-smi nvlink -s -i {i} and nvidia-smi nvlink -e -i {i}; reset the GPU (nvidia-smi -r -i {i}) or "
    "reboot; if links stay down, the baseboard or NVLink cabling needs service"
)
COUNTER_FIX = (
    "nvidia-smi nvlink -e -i {i} (error counters); watch whether they grow (dcgmi health -s n); "
    "nvidia-smi nvlink -ec -i {i} resets them"
)


@dataclass(frozen=True)
class LinkFinding:
    """One NVLink finding of a GPU: its code, rank (0 most severe; 1 and below drain), problem and fix template."""

    code: str
    rank: int
    problem: str
    fix: str


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) and "absent" not in value else {}


def fabric_supported(gpu: Mapping[str, Any]) -> bool:
    """Whether NVML answered a fabric state other than 'not supported' for this GPU."""
    state = _dict(gpu.get("fabric")).get("state")
    return isinstance(state, int) and state != NOT_SUPPORTED


def links_up(gpu: Mapping[str, Any]) -> int:
    """How many of the GPU's own NVLinks NVML reports active."""
    return sum(1 for link in _dict(gpu.get("nvlink")).get("links") or [] if link.get("active") is True)


def wired(gpus: Sequence[Mapping[str, Any]], nvswitches: int) -> bool:
    """Whether the node's evidence says an NVSwitch baseboard wires every NVLink of its GPUs: NVSwitches on the PCI
    bus, or a GPU registered with an NVLink fabric. A link up proves only that link: bridged PCIe cards wire some."""
    return nvswitches > 0 or any(fabric_supported(g) for g in gpus)


def most_up(gpus: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """The most NVLinks up on any GPU of each product (by NVML's name) on the node, MIG GPUs aside."""
    out: dict[str, int] = {}
    for g in gpus:
        name = g.get("name")
        if isinstance(name, str) and g.get("mig") is not True:
            out[name] = max(out.get(name, 0), links_up(g))
    return out


def fabric(gpu: Mapping[str, Any], fabric_manager: str) -> list[LinkFinding]:
    """The fabric registration's findings; `fabric_manager` says what was read of the daemon."""
    info = _dict(gpu.get("fabric"))
    state = info.get("state")
    if not isinstance(state, int) or state == NOT_SUPPORTED:
        return []
    got = info.get("health_mask")
    mask = got if isinstance(got, int) else 0
    read = f"NVML fabric state {state}"
    if state == NOT_STARTED:
        return [
            LinkFinding(
                FABRIC_NOT_STARTED,
                1,
                f"its NVLink fabric registration has not started ({read}, 'not started'): it runs CUDA but has no "
                f"NVLink peer-to-peer; {fabric_manager}",
                FM_FIX,
            )
        ]
    if state == IN_PROGRESS:
        waiting = (mask >> PARTITION_SHIFT) & PARTITION_WIDTH == PARTITION_NOT_ASSIGNED
        why = (
            "no partition is assigned to it yet (shared NVSwitch mode activates one per job)"
            if waiting
            else fabric_manager
        )
        return [
            LinkFinding(
                FABRIC_IN_PROGRESS,
                3,
                f"its NVLink fabric registration is still in progress ({read}): no NVLink peer-to-peer until it "
                f"completes; {why}",
                FM_FIX,
            )
        ]
    if state != COMPLETED:
        return [
            LinkFinding(FABRIC_DEGRADED, 3, f"an NVLink fabric state NVML does not define ({read})", FM_FIX)
        ]
    out = []
    status = info.get("status")
    if isinstance(status, int) and status != 0:
        name = STATUS_NAMES.get(status, f"NVML error {status}")
        out.append(
            LinkFinding(
                FABRIC_FAILED,
                1,
                f"its NVLink fabric registration completed with an error (NVML fabric status {status}: {name}): "
                "NVLink peer-to-peer is not available",
                FABRIC_FIX,
            )
        )
    said = [what for shift, width, bad, what in HEALTH_BITS if (mask >> shift) & width == bad]
    config = (mask >> CONFIG_SHIFT) & CONFIG_WIDTH
    if config in INCORRECT:
        said.append(f"incorrect configuration: {INCORRECT[config]}")
    summary = info.get("health_summary")
    if said or summary == SUMMARY_UNHEALTHY:
        shown = ", ".join(said) or "health summary 'unhealthy'"
        out.append(
            LinkFinding(
                FABRIC_DEGRADED, 1, f"its NVLink fabric reports {shown} (health mask 0x{mask:x})", FABRIC_FIX
            )
        )
    elif summary == SUMMARY_LIMITED:
        out.append(
            LinkFinding(
                FABRIC_DEGRADED,
                3,
                "its NVLink fabric runs at limited capacity (health summary 'limited capacity')",
                FABRIC_FIX,
            )
        )
    return out


def links(
    gpu: Mapping[str, Any], node_wired: bool, peers_up: Mapping[str, int] | None = None
) -> list[LinkFinding]:
    """The findings of the GPU's own links: down ones (against the count where the node is switched, against the
    most links up on a GPU of the same product (`peers_up`) where it is not), and error counters."""
    info = _dict(gpu.get("nvlink"))
    count = info.get("count")
    entries = [e for e in info.get("links") or [] if isinstance(e, dict)]
    if not isinstance(count, int) or count <= 0 or not entries:
        return []
    out: list[LinkFinding] = []
    down = [e["link"] for e in entries if e.get("active") is False]
    up = [e["link"] for e in entries if e.get("active") is True]
    shown = ", ".join(map(str, down[:18]))
    best = (peers_up or {}).get(str(gpu.get("name")), 0)
    if down and gpu.get("mig") is not True and node_wired:
        where = "" if up else " (every link: the node's NVSwitches or fabric wire them)"
        out.append(
            LinkFinding(
                NVLINK_DOWN, 1, f"{len(down)} of its {count} NVLinks are down{where}: link {shown}", LINK_FIX
            )
        )
    elif down and gpu.get("mig") is not True and len(up) < best:
        out.append(
            LinkFinding(
                NVLINK_DOWN,
                3,
                f"{len(up)} of its {count} NVLinks up, where another GPU of the same product on this node has "
                f"{best} (no NVSwitch: the links its bridges wire are not known to NVML; a node profile states the "
                f"count expected): link {shown} inactive",
                LINK_FIX,
            )
        )
    out += _counters(entries)
    return out


def _counters(entries: list[dict[str, Any]]) -> list[LinkFinding]:
    failing: list[str] = []
    history: list[str] = []
    for e in entries:
        again: dict[str, Any] = e["again"] if isinstance(e.get("again"), dict) else {}
        window = e.get("window_s") if isinstance(e.get("window_s"), (int, float)) else None
        if isinstance(e.get("recovery_failed"), int) and e["recovery_failed"] > 0:
            failing.append(
                f"link {e['link']}: {e['recovery_failed']} failed recoveries (the link was declared down)"
            )
        grew = {k: again[k] - e[k] for k in again if isinstance(e.get(k), int) and again[k] > e[k]}
        for kind in ("replay", "recovery"):
            if grew.get(kind):
                failing.append(f"link {e['link']}: {grew[kind]} new {kind} error(s) within {window or 0:g} s")
        crc = grew.get("crc_flit", 0) + grew.get("crc_data", 0)
        if crc and window:
            rate = crc / window
            (failing if rate >= CRC_FAIL_PER_S else history).append(
                f"link {e['link']}: CRC errors at {rate:.0f}/s"
            )
        old = [
            f"{e[k]} {k}"
            for k in ("replay", "recovery")
            if isinstance(e.get(k), int) and e[k] and k not in grew
        ]
        if old:
            history.append(f"link {e['link']}: {', '.join(old)} error(s) counted, none new in the window")
    out = []
    if failing:
        out.append(LinkFinding(NVLINK_ERRORS, 1, f"NVLink errors now: {'; '.join(failing[:4])}", LINK_FIX))
    if history:
        out.append(
            LinkFinding(
                NVLINK_ERRORS,
                4,
                f"NVLink error counters since their last reset: {'; '.join(history[:4])}",
                COUNTER_FIX,
            )
        )
    return out


def fabric_manager_text(daemons: Any) -> str:
    """What was read of nvidia-fabricmanager, for a finding's words."""
    state = daemons.get("nvidia-fabricmanager") if isinstance(daemons, dict) else None
    if not isinstance(state, dict):
        return "whether nvidia-fabricmanager runs was not read"
    if state.get("alive") is True:
        pids = state.get("pids") or []
        return (
            f"nvidia-fabricmanager runs (pid {pids[0]}): its log says why"
            if pids
            else "nvidia-fabricmanager runs"
        )
    if state.get("alive") is False:
        return "nvidia-fabricmanager is not running (no nv-fabricmanager process on this host)"
    return "whether nvidia-fabricmanager runs cannot be seen from this PID namespace"
