"""One GPU's findings from its NVML fields and its Xids: lost to NVML, row remapping, pending retirement, uncorrectable
ECC, a degraded PCIe link, clock slowdowns, persistence mode; and what each Xid the catalogue ranks means there."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from envcheck.checks.gpu_health import clock_findings, fabric_findings, state_findings, xid_fields
from envcheck.checks.gpu_health.node import GPU_LOST, PERSISTENCE_FIX, GpuFinding
from envcheck.checks.gpu_health.xid import XidMeaning, escalated, meaning_of, pci_key
from envcheck.core.result import FaultClass
from envcheck.probe.gpu_usage import foreign
from envcheck.probe.nvml_fields import GPU_IDLE
from envcheck.probe.system import is_absent

# Finding codes this module emits (each one is in envcheck.cluster.finding_codes.TABLE).
PERSISTENCE_OFF = "gpu.persistence_off"
ECC_UNCORRECTABLE = "gpu.ecc_uncorrectable"
ROW_REMAP_FAILED = "gpu.row_remap_failed"
ROW_REMAP_PENDING = "gpu.row_remap_pending"
RETIREMENT_PENDING = "gpu.retirement_pending"
PCIE_DEGRADED = "gpu.pcie_degraded"

LOST = ("GPU is lost", "GPU requires restart")  # NVML errors that are the GPU's own state, not the query's
RESET = "nvidia-smi -r -i {i} (GPU reset)"
LOST_FIX = f"drain; {RESET} or reboot the node; RMA if it recurs"
PCIE_FIX = (
    "reseat the GPU and its riser, check the slot: nvidia-smi -q -d PCIE -i {i}; "
    "lspci -vv -s {pci} | grep -E 'LnkCap|LnkSta'"
)
NOT_SUPPORTED_NAMES = {  # NVML fields a GPU may lack, by their key's first word
    "ecc": "ECC",
    "retired": "retired pages",
    "remapped": "remapped rows",
    "pcie": "PCIe link",
    "clock": "clock events",
    "persistence": "persistence mode",
    "temperature": "temperature",
    "mig": "MIG",
    "fabric": "NVLink fabric",
    "nvlink": "NVLink",
    "virtualization": "virtualization mode",
    "vgpu": "vGPU licence",
    "recovery": "recovery action",
    "inforom": "InfoROM",
    "repair": "repair status",
}


def as_dict(value: Any) -> dict[str, Any]:
    """`value` if it is a dict, else an empty one (a bundle's field of the wrong type)."""
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def label(gpu: Mapping[str, Any]) -> str:
    """'GPU 0 (NVIDIA H100 80GB HBM3, GPU-..., PCI 00000000:18:00.0)'."""
    parts = [gpu[k] for k in ("name", "uuid") if isinstance(gpu.get(k), str)]
    if isinstance(gpu.get("pci"), str):
        parts.append(f"PCI {gpu['pci']}")
    return f"GPU {gpu['index']}" + (f" ({', '.join(parts)})" if parts else "")


# Xid 154's recovery actions (gpu.c, _gpuRecoveryActionName) and what each asks of an operator; "None" is no
# finding (checks.gpu_health.kernel_events drops a GPU's 154 whose last action is None).
RECOVERY = {
    "Node Reboot Required": XidMeaning("the driver asks for a node reboot", 0, "drain and reboot the node"),
    "GPU Reset Required": XidMeaning("the driver asks for a GPU reset", 1, f"drain, then {RESET}"),
    "Drain and Reset": XidMeaning("the driver asks to drain the GPU and reset it", 1, f"drain, then {RESET}"),
    "Drain P2P": XidMeaning(
        "the driver asks to stop peer-to-peer traffic to the GPU", 1, f"drain, then {RESET}"
    ),
    "Recover IMEX Domain": XidMeaning(
        "the driver asks to recover the node's IMEX domain",
        2,
        "restart the IMEX daemon (nvidia-imex) of the domain",
    ),
}


def _meaning(
    event: Mapping[str, Any], windowed: bool, siblings: Sequence[Mapping[str, Any]] = ()
) -> tuple[XidMeaning, str, str]:
    """(what the Xid means here, its code, words on its cause): Xid 154 by the action it names, an Xid by what its own
    message says (checks.gpu_health.xid_fields, among the GPU's other Xids: `siblings`), an Xid caused by a previous
    one (45's "caused by previous Xid 79") as that one when it is the worse, a repeating application Xid escalated
    inside an operator's window (since boot, other users' jobs add up to any count)."""
    xid = int(event["xid"])
    m, code, why = meaning_of(xid), f"xid.{xid}", ""
    action = xid_fields.recovery_label(event)
    if xid == 154 and isinstance(action, str) and action in RECOVERY:
        return RECOVERY[action], code, f": {event.get('action') or action}"
    own = xid_fields.judge(event, siblings)
    if own is not None:
        m, code = own.meaning, own.code
    cause = event.get("cause")
    if isinstance(cause, int) and cause != xid:
        said = xid_fields.judge_cause(cause, siblings)
        before = said.meaning if said else meaning_of(cause)
        if before.rank is not None and (m.rank is None or before.rank < m.rank):
            code = said.code if said else f"xid.{cause}"
            m, why = XidMeaning(f"caused by Xid {cause}: {before.meaning}", before.rank, before.fix), ""
    if windowed and (worse := escalated(xid, int(event.get("bursts") or 1))) is not None:
        m, code = worse, f"xid.{xid}.repeated"
    return m, code, why


def xid_findings(
    events: Sequence[Mapping[str, Any]], label: str, who: str, i: str, windowed: bool
) -> list[GpuFinding]:
    """One finding per Xid that the catalogue ranks, with the MIG instance the driver attributed it to."""
    out = []
    for e in events:
        m, code, why = _meaning(e, windowed, events)
        if m.rank is None:
            continue
        mig = f" on MIG instance {e['mig']}" if isinstance(e.get("mig"), str) else ""
        text = f": {e['text']}" if e.get("text") else ""
        out.append(
            GpuFinding(
                f"Xid {e['xid']} ({m.meaning}{why}){mig}, {e.get('count', 1)}x in the kernel log since boot{text}",
                m.fix.format(i=i),
                FaultClass.NODE,
                code=code,
                rank=m.rank,
                gpu=label,
                who=who,
            )
        )
    return out


@dataclass(frozen=True)
class NodeView:
    """What the node says around one GPU: whether an NVSwitch baseboard wires its NVLinks (fabric_findings.wired),
    what was read of nvidia-fabricmanager, and the most NVLinks up on a GPU of each product (fabric_findings.most_up)."""

    wired: bool = False
    fabric_manager: str = "whether nvidia-fabricmanager runs was not read"
    peers_up: Mapping[str, int] = field(default_factory=dict)  # fabric_findings.most_up


def gpu_findings(
    gpu: Mapping[str, Any],
    events: list[Mapping[str, Any]],
    windowed: bool,
    node: NodeView = NodeView(),
    notes: list[str] | None = None,
) -> list[GpuFinding]:
    """The findings of one GPU NVML lists, its Xids (`events`) first; where two sources disagree, the note saying
    which was followed goes to `notes`."""
    i, name, who = str(gpu["index"]), label(gpu), f"GPU {gpu['index']}"
    key = pci_key(gpu["pci"]) if isinstance(gpu.get("pci"), str) else None
    pci = f"{key}.0" if key else "<PCI address>"  # lspci's and nvidia-smi's domain:bus:device.function
    # NVML's recovery action is the driver's state now; the kernel log's Xid 154 what it asked then.
    xid154 = [e for e in events if int(e.get("xid", 0)) == 154]
    found, note = state_findings.recovery(gpu, xid154)
    if note and notes is not None:
        notes.append(f"GPU {i}: {note}")
    read_now = isinstance(gpu.get("recovery_action"), int) and not isinstance(
        gpu.get("recovery_action"), bool
    )
    out = xid_findings([e for e in events if not (read_now and e in xid154)], name, who, i, windowed)

    def add(rank: int, problem: str, fix: str, code: str) -> None:
        out.append(
            GpuFinding(
                problem, fix.format(i=i, pci=pci), FaultClass.NODE, code=code, rank=rank, gpu=name, who=who
            )
        )

    for f in [
        *found,
        *state_findings.licence(gpu),
        *state_findings.inforom(gpu),
        *state_findings.repairs(gpu),
    ]:
        add(f.rank, f.problem, f.fix, f.code)
    for lf in [
        *fabric_findings.fabric(gpu, node.fabric_manager),
        *fabric_findings.links(gpu, node.wired, node.peers_up),
    ]:
        add(lf.rank, lf.problem, lf.fix, lf.code)
    lost = [v["absent"] for v in gpu.values() if is_absent(v) and any(t in v["absent"] for t in LOST)]
    if isinstance(gpu.get("error"), str) or lost:
        add(0, f"NVML cannot read it: {gpu.get('error') or lost[0]}", LOST_FIX, GPU_LOST)
    rows = as_dict(gpu.get("remapped_rows"))
    if rows.get("failure") is True:
        add(
            1,
            "row remapping failed: the GPU memory has no spare rows left for new errors",
            "drain and RMA the GPU (nvidia-smi -q -d ROW_REMAPPER -i {i}: Remapping Failure Occurred: Yes)",
            ROW_REMAP_FAILED,
        )
    if rows.get("pending") is True:
        add(
            1,
            "a memory row remap is pending: it takes effect at the next GPU reset",
            f"drain, then {RESET} or reboot; nvidia-smi -q -d ROW_REMAPPER -i {{i}}",
            ROW_REMAP_PENDING,
        )
    if gpu.get("retired_pages_pending") is True:
        add(
            1,
            "memory pages are pending retirement: they take effect at the next GPU reset or driver reload",
            f"drain, then {RESET} or reboot; nvidia-smi -q -d PAGE_RETIREMENT -i {{i}}",
            RETIREMENT_PENDING,
        )
    volatile = _int(gpu.get("ecc_volatile_uncorrected"))
    if volatile:
        add(
            1,
            f"{volatile} uncorrectable ECC error(s) since the driver loaded",
            f"drain; nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER -i {{i}}; {RESET}; RMA if they recur",
            ECC_UNCORRECTABLE,
        )
    events_mask = _int(gpu.get("clock_events"))
    width, width_max = _int(gpu.get("pcie_width")), _int(gpu.get("pcie_width_max"))
    if width and width_max and width < width_max:
        add(3, f"PCIe link runs at x{width}, below its x{width_max} maximum", PCIE_FIX, PCIE_DEGRADED)
    gen, gen_max = _int(gpu.get("pcie_gen")), _int(gpu.get("pcie_gen_max"))
    # An idle GPU drops its link generation to save power; only one under another process's load below its maximum
    # is degraded. A GPU that is not idle with no process on it is envcheck's own lane (the CUDA probe's copy just
    # woke it, and the link retrains up in its own time): not evidence.
    loaded = foreign(gpu.get("processes"))
    if (
        gen
        and gen_max
        and gen < gen_max
        and events_mask is not None
        and not events_mask & GPU_IDLE
        and loaded
    ):
        add(
            3,
            f"PCIe link runs at gen {gen}, below its gen {gen_max} maximum while the GPU is busy "
            f"(pid {loaded[0].get('pid')})",
            PCIE_FIX,
            PCIE_DEGRADED,
        )
    slow = clock_findings.slowdown(gpu)
    if slow is not None:
        add(4, slow[0], slow[1], clock_findings.CLOCKS_SLOWDOWN)
    if gpu.get("persistence") is False:
        add(
            5,
            "persistence mode is off: the driver tears the GPU down between clients, so every job start pays "
            "its initialisation",
            PERSISTENCE_FIX,
            PERSISTENCE_OFF,
        )
    return out


def busy(gpus: Sequence[Mapping[str, Any]]) -> list[str]:
    """'GPU 3: 2 process(es) of another job or user (pid 4242 python, ...), 76.0 of 79.6 GiB' for each GPU in use."""
    out = []
    for g in gpus:
        others = foreign(g.get("processes"))
        if others:
            names = ", ".join(
                f"pid {p.get('pid')}" + (f" {p['name']}" if p.get("name") else "") for p in others[:3]
            )
            mem = as_dict(g.get("memory"))
            held = (
                f", {mem['used_mib'] / 1024:.1f} of {mem['total_mib'] / 1024:.1f} GiB in use"
                if isinstance(mem.get("used_mib"), int) and isinstance(mem.get("total_mib"), int)
                else ""
            )
            out.append(f"GPU {g['index']} in use by {len(others)} other process(es) ({names}){held}")
    return out
