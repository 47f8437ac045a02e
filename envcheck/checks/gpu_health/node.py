"""Node-level GPU findings beyond one GPU's NVML fields: an NVML call that hung (with the kernel's view of the
stuck thread), a GPU that fell off the bus without an Xid, and a GPU on the PCI bus that NVML does not list."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from envcheck.checks.gpu_health.xid import pci_key
from envcheck.probe.hang import describe

RESET = "nvidia-smi -r -i {i} (GPU reset)"
BUS_FIX = ("drain the node and reboot it (the GPU no longer answers on PCIe); check its seating, power and cooling; "
           "lspci -s {pci} ; RMA if it recurs")


@dataclass(frozen=True)
class Finding:
    """One problem on one GPU; `rank` 0 is the most severe; `code` is the stable finding code."""

    rank: int
    gpu: str  # 'GPU 0 (name, uuid, PCI ...)' or 'PCI 0000:3b:00 (...)'
    who: str  # 'GPU 0' or the PCI address: how the remediation names it
    problem: str
    fix: str
    code: str = "gpu.health"


def hang_finding(data: Mapping[str, Any]) -> Finding | None:
    """NVML did not return within its budget: the call, the budget, the thread's state and wchan (nvml.hang)."""
    hung = data.get("nvml_hung")
    if not isinstance(hung, int) or isinstance(hung, bool):
        return None
    who = f"GPU {hung}" if hung >= 0 else "NVML"
    hang = data.get("nvml_hang")
    evidence = f" [{describe(hang)}]" if isinstance(hang, dict) and "call" in hang and "budget_s" in hang else ""
    reset = RESET.format(i=hung) if hung >= 0 else "nvidia-smi -r (GPU reset)"
    return Finding(0, who, who, f"{data.get('nvml_error')}: a GPU in a bad state hangs NVML{evidence}",
                   f"nvidia-smi -q (does it hang too?); dmesg | grep -i xid; {reset} or reboot the node; "
                   "RMA if it recurs", "nvml.hang")


def _nvml_keys(gpus: Sequence[Mapping[str, Any]]) -> set[str]:
    return {k for g in gpus if isinstance(g.get("pci"), str) and (k := pci_key(g["pci"]))}


def bus_findings(events: Sequence[Mapping[str, Any]], gpus: Sequence[Mapping[str, Any]]) -> list[Finding]:
    """NVRM's 'has fallen off the bus' line without an Xid (newer drivers): gpu.fell_off_bus."""
    out = []
    for e in events:
        if isinstance(e, dict) and isinstance(e.get("pci"), str):
            listed = " (NVML still lists it)" if e["pci"] in _nvml_keys(gpus) else " (NVML no longer lists it)"
            out.append(Finding(0, f"PCI {e['pci']}.0", f"PCI {e['pci']}.0", f"fell off the bus{listed}, "
                               f"{e.get('count', 1)}x in the kernel log: {e.get('text', '')}",
                               BUS_FIX.format(pci=f"{e['pci']}.0"), "gpu.fell_off_bus"))
    return out


def missing_findings(pci_gpus: Any, gpus: Sequence[Mapping[str, Any]], data: Mapping[str, Any]) -> list[Finding]:
    """NVIDIA display/3D functions on the PCI bus that NVML does not list (NVML answered): gpu.lost."""
    if not isinstance(pci_gpus, list) or data.get("nvml_error") or data.get("nvml_hung") is not None:
        return []
    listed = _nvml_keys(gpus)
    missing = [a for a in pci_gpus if isinstance(a, str) and pci_key(a) not in listed]
    return [Finding(0, f"PCI {a}", f"PCI {a}", f"on the PCI bus but not listed by NVML ({len(gpus)} of "
                    f"{len(pci_gpus)} GPUs): the driver lost it", BUS_FIX.format(pci=a), "gpu.lost")
            for a in missing]
