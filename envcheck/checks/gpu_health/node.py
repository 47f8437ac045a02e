"""Node-level GPU findings beyond one GPU's NVML fields: an NVML call that hung or a first initialisation that was
slow (with the kernel's view of the thread), a GPU that fell off the bus without an Xid, and a GPU on the PCI bus
that NVML does not list, judged only among the GPUs this process was given (probe.gpu_access)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from envcheck.checks.gpu_health.xid import pci_key
from envcheck.core.findings import Finding
from envcheck.core.result import FaultClass
from envcheck.probe.gpu_access import Allocation, allocation, not_given
from envcheck.probe.hang import describe, stuck_in_kernel

# Finding codes this module emits (each one is in envcheck.cluster.finding_codes.TABLE).
FELL_OFF_BUS = "gpu.fell_off_bus"
GPU_INIT_SLOW = "gpu.init_slow"
GPU_LOST = "gpu.lost"
NVML_HANG = "nvml.hang"

RESET = "nvidia-smi -r -i {i} (GPU reset)"
BUS_FIX = (
    "drain the node and reboot it (the GPU no longer answers on PCIe); check its seating, power and cooling; "
    "lspci -s {pci} ; RMA if it recurs"
)
PERSISTENCE_FIX = (
    "sudo nvidia-smi -pm 1, or run nvidia-persistenced (systemctl enable --now nvidia-persistenced)"
)
SLOW_RANK = 4  # a first slow start warns; a repeated one, or a thread stuck in the kernel, drains (rank 0)


PASSED_THROUGH = ("vfio-pci", "pci-stub")  # sysfs drivers that hold a GPU for a virtual machine


@dataclass(frozen=True, kw_only=True)
class GpuFinding(Finding):
    """One problem on one GPU; `rank` 0 is the most severe; `fault_class` is who must act (a node's hardware or
    driver, or `config`: how envcheck was deployed)."""

    rank: int
    gpu: str  # 'GPU 0 (name, uuid, PCI ...)' or 'PCI 0000:3b:00 (...)'
    who: str  # 'GPU 0' or the PCI address: how the remediation names it


def hang_finding(data: Mapping[str, Any]) -> GpuFinding | None:
    """NVML did not return within its budget: the node's (nvml.hang), unless it was the initialisation and its
    thread was sleeping or running, not stuck in the kernel: a slow cold start, a warning that names persistence
    mode on a first overrun, the node's (gpu.init_slow) when it overran in two runs in a row."""
    hung = data.get("nvml_hung")
    if not isinstance(hung, int) or isinstance(hung, bool):
        return None
    who = f"GPU {hung}" if hung >= 0 else "NVML"
    hang = data.get("nvml_hang")
    complete = isinstance(hang, dict) and "call" in hang and "budget_s" in hang
    evidence = f" [{describe(hang)}]" if complete and isinstance(hang, dict) else ""
    # Only the initialisation is a cold start: a per-GPU read that does not return after NVML came up is a hang.
    if (
        isinstance(hang, dict)
        and hang.get("call") == "nvmlInit"
        and hang.get("state")
        and not stuck_in_kernel(hang)
    ):
        return _slow(f"{data.get('nvml_error')}{evidence}", _overruns(data) >= 2)
    reset = RESET.format(i=hung) if hung >= 0 else "nvidia-smi -r (GPU reset)"
    return GpuFinding(
        f"{data.get('nvml_error')}: a GPU in a bad state hangs NVML{evidence}",
        f"nvidia-smi -q (does it hang too?); dmesg | grep -i xid; {reset} or reboot the node; "
        "RMA if it recurs",
        FaultClass.NODE,
        code=NVML_HANG,
        rank=0,
        gpu=who,
        who=who,
    )


def _overruns(data: Mapping[str, Any]) -> int:
    count = data.get("overruns")
    return count if isinstance(count, int) and not isinstance(count, bool) else 0


def _slow(what: str, repeated: bool) -> GpuFinding:
    if repeated:
        return GpuFinding(
            f"the GPUs' initialisation overran its budget in two runs in a row: {what}",
            f"{PERSISTENCE_FIX}; if it stays slow with persistence on: nvidia-smi -q, dmesg | "
            "grep -iE 'NVRM|Xid', reboot the node",
            FaultClass.NODE,
            code=GPU_INIT_SLOW,
            rank=0,
            gpu="GPUs",
            who="the node",
        )
    return GpuFinding(
        f"a slow first initialisation, not a hang: {what}; with persistence mode off every client pays it",
        PERSISTENCE_FIX,
        FaultClass.NODE,
        code=GPU_INIT_SLOW,
        rank=SLOW_RANK,
        gpu="GPUs",
        who="the node",
    )


def warmup_finding(data: Mapping[str, Any]) -> GpuFinding | None:
    """The node path's first initialisation finished, but after its budget (a cold start): a warning naming
    persistence mode; over budget in two runs in a row: the node's."""
    warm = data.get("warmup")
    if (
        not isinstance(warm, dict)
        or not isinstance(warm.get("hang"), dict)
        or data.get("nvml_hung") is not None
    ):
        return None
    took = warm.get("seconds")
    done = f"finished after {took:g} s" if isinstance(took, (int, float)) else "still running"
    return _slow(
        f"NVML's first initialisation took longer than its {warm.get('budget_s', 0):g} s budget ({done}; "
        f"{describe(warm['hang'])})",
        _overruns(data) >= 2,
    )


def _nvml_keys(gpus: Sequence[Mapping[str, Any]]) -> set[str]:
    return {k for g in gpus if isinstance(g.get("pci"), str) and (k := pci_key(g["pci"]))}


def bus_findings(
    events: Sequence[Mapping[str, Any]], gpus: Sequence[Mapping[str, Any]], alloc: Allocation | None = None
) -> list[GpuFinding]:
    """NVRM's 'fallen off the bus' without an Xid (at probe, or a newer driver at run time): gpu.fell_off_bus, for the
    GPUs this process was given (the kernel log is the host's: another container's GPU is not this one's to judge).
    A line that names no GPU (a grep kept only the message's last line) is the node's when this process answers for
    the whole node; given only some GPUs, it cannot say whose, and warns."""
    out = []
    whole = alloc is None or alloc.whole_node
    for e in events:
        if not isinstance(e, dict):
            continue
        pci = e.get("pci")
        if isinstance(pci, str) and (alloc is None or alloc.ours(pci)):
            listed = " (NVML still lists it)" if pci in _nvml_keys(gpus) else " (NVML no longer lists it)"
            where, rank = f"PCI {pci}.0", 0
        elif pci is None:
            listed = "" if whole else " (the line names no GPU: it may be another job's)"
            where, rank = "a GPU the log does not name", 0 if whole else 3
        else:
            continue
        out.append(
            GpuFinding(
                f"fell off the bus{listed}, {e.get('count', 1)}x in the kernel log: {e.get('text', '')}",
                BUS_FIX.format(pci=f"{pci}.0" if isinstance(pci, str) else "<PCI address>"),
                FaultClass.NODE,
                code=FELL_OFF_BUS,
                rank=rank,
                gpu=where,
                who=where,
            )
        )
    return out


def drained(data: Mapping[str, Any]) -> list[str]:
    """The GPUs (PCI addresses) NVML does not list because an operator drained them (nvmlDeviceQueryDrainState):
    'Any new NVML process will no longer see this GPU' (nvml.h), so their absence is not a loss."""
    raw = data.get("drained")
    return sorted(a for a, v in raw.items() if v is True) if isinstance(raw, dict) else []


def given(data: Mapping[str, Any]) -> Allocation:
    """The GPUs this process was given, from the captured access facts (a bundle without them: the whole node)."""
    access = data.get("access")
    return allocation(access if isinstance(access, dict) else {}, data.get("pci_gpus") or [])


def hidden(data: Mapping[str, Any]) -> list[str]:
    """The node's GPUs (PCI addresses) this process was not given: not visible here, never judged."""
    bus = data.get("pci_gpus")
    return not_given(given(data), bus) if isinstance(bus, list) else []


def missing_findings(
    pci_gpus: Any,
    gpus: Sequence[Mapping[str, Any]],
    data: Mapping[str, Any],
    explained: frozenset[str] | set[str] = frozenset(),
) -> list[GpuFinding]:
    """GPUs this process was given that NVML does not list (NVML answered): gpu.lost, by PCI address when the
    evidence names them, else by count. A GPU of the node that was not given is not visible here, never lost; one
    the kernel log already names (`explained`) has its cause's finding; one bound to vfio-pci or pci-stub (passed
    through to a virtual machine) is not the host driver's."""
    if not isinstance(pci_gpus, list) or data.get("nvml_error") or data.get("nvml_hung") is not None:
        return []
    alloc = given(data)
    listed = _nvml_keys(gpus)
    if not alloc.whole_node and alloc.buses is None:
        if alloc.count is not None and len(gpus) < alloc.count:
            return [
                GpuFinding(
                    f"NVML lists {len(gpus)} of the {alloc.count} GPU(s) given by "
                    f"{alloc.source}: the driver lost {alloc.count - len(gpus)}",
                    BUS_FIX.format(pci="<address>"),
                    FaultClass.NODE,
                    code=GPU_LOST,
                    rank=0,
                    gpu="GPUs",
                    who="the GPUs given",
                )
            ]
        return []
    raw = data.get("pci_drivers")
    drivers: dict[str, Any] = raw if isinstance(raw, dict) else {}
    missing = [
        a
        for a in pci_gpus
        if isinstance(a, str)
        and pci_key(a) not in listed
        and pci_key(a) not in explained
        and drivers.get(a) not in PASSED_THROUGH
        and alloc.ours(pci_key(a) or "")
        and a not in drained(data)
    ]
    scope = (
        f"{len(gpus)} of {len(pci_gpus)} GPUs"
        if alloc.whole_node
        else f"{len(gpus)} of the {alloc.count} GPU(s) given by {alloc.source}"
    )
    return [
        GpuFinding(
            f"on the PCI bus but not listed by NVML ({scope}): the driver lost it",
            BUS_FIX.format(pci=a),
            FaultClass.NODE,
            code=GPU_LOST,
            rank=0,
            gpu=f"PCI {a}",
            who=f"PCI {a}",
        )
        for a in missing
    ]
