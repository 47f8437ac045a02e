"""What the driver said of GPUs that failed to start, as findings naming the GPU by PCI address: refused at probe
(not supported, the wrong kernel module flavour, an invalid BAR), failed to initialise at first open (RmInitAdapter,
with its GSP boot, firmware or power cause), GSP timeouts, a reset the driver asks for, NVLink training and fabric
failures (reset_messages), NVSwitch SXids (sxid), and the probe's counts (checks.gpu_health.kernel_events finds them;
driver_messages says where each format comes from).

One finding per GPU, from its most specific cause: a GPU the proprietary module cannot drive also fails RmInitAdapter
(0x22:0x56), and that is the same fault, not a second one. A message that names the GPU by device minor is mapped to
its PCI address through /proc/driver/nvidia/gpus ("Device Minor"); the driver's GPU instance number ("GPU6") only
through the log itself (kernel_events). Only the GPUs this process was given are judged; a message that names no GPU
is the node's when this process answers for the whole node, and a warning otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from envcheck.checks.gpu_health.driver_causes import (
    CAUSES,
    CLAIMED,
    COUNT_FIX,
    INIT_STATUS,
    LOAD_FAILED,
    PROBE_FAILED,
    RM_STATUS,
    RUNTIME,
    Cause,
    count_problem,
)
from envcheck.checks.gpu_health.node import PASSED_THROUGH, GpuFinding, given
from envcheck.checks.gpu_health.reset_messages import RESET_CAUSES
from envcheck.checks.gpu_health.sxid import sxid_finding
from envcheck.checks.gpu_health.xid import pci_key
from envcheck.core.result import FaultClass

RUNTIME_CAUSES = {**RUNTIME, **RESET_CAUSES}  # the driver's messages after a GPU started, by kind
_QUIET = ("vfio_bound", "excluded")  # a GPU deliberately not the driver's: for a VM, or excluded by the admin


def minor_map(data: Mapping[str, Any]) -> dict[int, str]:
    """Device minor -> PCI key, from /proc/driver/nvidia/gpus as captured (`access.driver_gpus`)."""
    access = data.get("access")
    known = access.get("driver_gpus") if isinstance(access, dict) else None
    if not isinstance(known, dict):
        return {}
    return {
        info["minor"]: key
        for key, info in known.items()
        if isinstance(info, dict) and isinstance(info.get("minor"), int)
    }


def _log_list(data: Mapping[str, Any], name: str) -> list[dict[str, Any]]:
    log = data.get("kernel_log")
    items = log.get(name) if isinstance(log, dict) else None
    return [i for i in items or [] if isinstance(i, dict)]


def where(entry: Mapping[str, Any], minors: Mapping[int, str]) -> str | None:
    """The PCI key an entry names: its own, else its device minor's."""
    if isinstance(entry.get("pci"), str):
        return pci_key(entry["pci"])
    return minors.get(entry["minor"]) if isinstance(entry.get("minor"), int) else None


def _unnamed(entry: Mapping[str, Any]) -> str:
    if isinstance(entry.get("minor"), int):
        return f"the GPU of device minor {entry['minor']}"
    if isinstance(entry.get("gpu_index"), int):
        return f"the driver's GPU{entry['gpu_index']} (the log does not say its PCI address)"
    return "a GPU the log does not name"


def _status_words(status: Any) -> str:
    """' 0x62:0x40:2168: GSP firmware init, invalid state' from RmInitAdapter's numbers."""
    if not isinstance(status, str):
        return ""
    parts = status.split(":")
    try:
        init, rm = int(parts[0], 16), int(parts[1], 16)
    except (ValueError, IndexError):
        return f" ({status})"
    words = [w for w in (INIT_STATUS.get(init), RM_STATUS.get(rm)) if w]
    return f" ({status}{': ' + ', '.join(words) if words else ''})"


def _nvml_reads(data: Mapping[str, Any]) -> set[str]:
    """The GPUs (PCI keys) NVML lists and reads without a per-GPU error now."""
    gpus = [g for g in data.get("gpus") or [] if isinstance(g, dict)]
    return {
        k
        for g in gpus
        if isinstance(g.get("pci"), str) and not g.get("error") and isinstance(g.get("name"), str)
        if (k := pci_key(g["pci"]))
    }


def _finding(
    cause: Cause, entry: Mapping[str, Any], key: str | None, rank: int, extra: str = ""
) -> GpuFinding:
    pci = f"{key}.0" if key else "<PCI address>"
    who = f"PCI {pci}" if key else _unnamed(entry)
    count = int(entry.get("count") or 1)
    said = f"{count}x in the kernel log: " if count > 1 else "kernel log: "
    fill = {"bar": "", "size_mib": "?", **entry, "status": _status_words(entry.get("status"))}
    return GpuFinding(
        f"{cause.problem.format(**fill)}{extra}; {said}{entry.get('text', '')}",
        cause.fix.format(pci=pci),
        FaultClass.NODE,
        code=cause.code,
        rank=rank,
        gpu=who,
        who=who,
    )


def driver_findings(data: Mapping[str, Any]) -> list[GpuFinding]:
    """Findings for the kernel log's driver events (`kernel_log.driver`), among the GPUs this process was given."""
    entries = _log_list(data, "driver")
    alloc, minors, reads = given(data), minor_map(data), _nvml_reads(data)

    def ours(key: str | None) -> bool:
        return alloc.ours(key) if key else True

    def rank_of(key: str | None, rank: int) -> int:
        return rank if key or alloc.whole_node else max(rank, 3)  # unnamed, on a partial allocation: whose?

    by_gpu: dict[str | None, dict[str, dict[str, Any]]] = {}
    for entry in entries:
        kind = str(entry.get("kind"))
        if kind == "init_failed_minor":
            kind = "init_failed"
        if kind in CAUSES:
            kinds = by_gpu.setdefault(where(entry, minors), {})
            seen = kinds.get(kind)
            if (
                seen is None
                or int(entry.get("count") or 1) > int(seen.get("count") or 1)
                or "status" in entry
            ):
                kinds[kind] = {**(seen or {}), **entry}
    out: list[GpuFinding] = []
    deliberate = quiet(data)
    legacy = legacy_target(data)
    if legacy and None in by_gpu and "legacy_gpu" in by_gpu[None]:  # the notice names a model, not an address
        by_gpu[legacy] = {"legacy_gpu": by_gpu[None].pop("legacy_gpu")}
        by_gpu = {k: v for k, v in by_gpu.items() if v}
    for key, kinds in by_gpu.items():
        if not ours(key) or key in deliberate:
            continue
        kind = next(k for k in CAUSES if k in kinds)
        entry = kinds[kind]
        if kind in ("init_failed", "gsp_boot") and "init_failed" in kinds:
            entry = {**kinds.get("gsp_boot", {}), **kinds["init_failed"]}
            status = str(entry.get("status", ""))
            kind = "gsp_boot" if "gsp_boot" in kinds or status.startswith(("0x62:", "0x63:")) else kind
            kind = "firmware_missing" if status.startswith("0x61:") else kind
        if kind in ("init_failed", "gsp_boot") and key in reads:  # a later open initialised it: it works now
            out.append(_finding(CAUSES[kind], entry, key, 4, ", earlier; NVML reads it now"))
        elif kind == "bar_invalid" and key in reads:  # 535 to 575 go on with a GPU whose BAR1/2 is invalid
            out.append(_finding(CAUSES[kind], entry, key, 3, "; the driver went on and NVML reads the GPU"))
        elif kind == "legacy_gpu" and reads - {key}:  # an old display card beside working GPUs
            out.append(_finding(CAUSES[kind], entry, key, 3, f"; {len(reads - {key})} other GPU(s) work"))
        else:
            out.append(_finding(CAUSES[kind], entry, key, rank_of(key, CAUSES[kind].rank)))
    for entry in entries:
        kind, key = str(entry.get("kind")), where(entry, minors)
        if kind in RUNTIME_CAUSES and ours(key):
            cause = RUNTIME_CAUSES[kind]
            out.append(_finding(cause, entry, key, rank_of(key, cause.rank)))
        elif kind == "sxid" and (judged := sxid_finding(entry, alloc.whole_node)) is not None:
            out.append(judged)
    named = {k for k in by_gpu if k} | quiet(data)
    return out + _probe_counts(entries, data, named, ours)


def quiet(data: Mapping[str, Any]) -> set[str]:
    """PCI keys of GPUs deliberately not the driver's: bound to vfio-pci (a VM's), or excluded by the admin."""
    raw = data.get("pci_drivers")
    drivers: dict[str, Any] = raw if isinstance(raw, dict) else {}
    keys = {pci_key(a) for a, d in drivers.items() if d in PASSED_THROUGH}
    keys |= {pci_key(e["pci"]) for e in _log_list(data, "driver") if e.get("kind") in _QUIET and e.get("pci")}
    access = data.get("access")
    known = access.get("driver_gpus") if isinstance(access, dict) else None
    if isinstance(known, dict):  # /proc/driver/nvidia/gpus/*/information: "GPU Excluded: Yes"
        keys |= {
            pci_key(k) for k, info in known.items() if isinstance(info, dict) and info.get("excluded") is True
        }
    return {k for k in keys if k}


def _probe_counts(
    entries: Sequence[Mapping[str, Any]],
    data: Mapping[str, Any],
    named: set[str],
    ours: Callable[[str | None], bool],
) -> list[GpuFinding]:
    """'probe routine failed / not called for N device(s)' and a load that initialised no GPU: named by the GPUs
    on the PCI bus that the driver did not take, when no more precise message already named them."""
    bus = data.get("pci_gpus")
    raw = data.get("pci_drivers")
    drivers: dict[str, Any] = raw if isinstance(raw, dict) else {}
    fell = {k for b in _log_list(data, "bus") if isinstance(b.get("pci"), str) and (k := pci_key(b["pci"]))}
    untaken = _untaken(data, named | fell)
    # No GPU of the host's on the bus (a CPU node; every GPU a VM's): the driver's "none found" is its normal output.
    hosts_none = isinstance(bus, list) and not [a for a in bus if pci_key(a) not in quiet(data)]
    out = []
    for entry in entries:
        kind = str(entry.get("kind"))
        if kind not in ("probe_failed", "probe_not_called", "no_devices"):
            continue
        devices = int(entry.get("devices") or 0)
        if kind == "probe_failed" and devices and len((named - quiet(data)) | fell) >= devices:
            continue  # every failed probe is named by its own cause
        if kind == "no_devices" and (named - quiet(data) or fell):
            continue  # the load failed because of the GPUs named: their findings say why
        if kind in ("probe_not_called", "no_devices") and (hosts_none or (drivers and not untaken)):
            continue  # no GPU for the host driver, or every one it did not get is passed through (vfio-pci)
        targets: list[str | None] = [a for a in untaken if ours(pci_key(a))] or [None]
        for address in targets[: devices or len(targets)]:
            key = pci_key(address) if address else None
            where_ = f"PCI {key}.0" if key else "GPUs"
            out.append(
                GpuFinding(
                    f"{count_problem(kind, devices, drivers.get(address or ''))}; kernel log: "
                    f"{entry.get('text', '')}",
                    COUNT_FIX[kind].format(pci=f"{key}.0" if key else "<PCI address>"),
                    FaultClass.NODE,
                    code={"probe_failed": PROBE_FAILED, "probe_not_called": CLAIMED}.get(kind, LOAD_FAILED),
                    rank=1 if kind == "no_devices" else 0,
                    gpu=where_,
                    who=where_ if key else "the node",
                )
            )
    return out


def legacy_target(data: Mapping[str, Any]) -> str | None:
    """The PCI key of the GPU an unnamed legacy-branch notice is about: the one GPU on the bus the driver did not
    take (the notice names the model only); None when the log has none or it could be more than one GPU."""
    entries = _log_list(data, "driver")
    if not any(e.get("kind") == "legacy_gpu" and not e.get("pci") for e in entries):
        return None
    minors = minor_map(data)
    named = {k for e in entries if e.get("kind") in CAUSES and (k := where(e, minors))}
    untaken = _untaken(data, named)
    return pci_key(untaken[0]) if len(untaken) == 1 else None


def _untaken(data: Mapping[str, Any], named: set[str]) -> list[str]:
    """The GPUs on the PCI bus the driver did not take (no /proc/driver/nvidia entry), beyond `named`."""
    bus = data.get("pci_gpus")
    taken = set(minor_map(data).values()) | quiet(data)
    return [
        a
        for a in (bus if isinstance(bus, list) else [])
        if isinstance(a, str) and (key := pci_key(a)) and key not in taken | named
    ]


def bus_is_named(data: Mapping[str, Any]) -> set[str]:
    """The PCI keys the kernel log's fell-off-the-bus and driver messages name, and the GPUs deliberately not the
    driver's (gpu.lost then says no more of them)."""
    minors = minor_map(data)
    keys = {pci_key(b["pci"]) for b in _log_list(data, "bus") if isinstance(b.get("pci"), str)}
    keys |= {
        where(e, minors) for e in _log_list(data, "driver") if e.get("kind") in (*CAUSES, "init_failed_minor")
    }
    legacy = legacy_target(data)  # an unnamed legacy-branch notice: the one GPU the driver did not take
    return {k for k in keys if k} | quiet(data) | ({legacy} if legacy else set())
