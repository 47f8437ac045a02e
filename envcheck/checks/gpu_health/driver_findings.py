"""What the driver said of GPUs that failed to start, as findings naming the GPU by PCI address: fallen off the bus at
probe, probe failures, invalid BARs, RmInitAdapter failures, GSP timeouts, a GPU this module cannot drive, an API
mismatch (checks.gpu_health.kernel_events finds them; driver_messages says where each format comes from).

A message that names the GPU by device minor (rm_init_adapter) or by the driver's GPU index (the GSP's "GPU1") is
mapped to its PCI address through /proc/driver/nvidia/gpus, which lists each GPU with its "Device Minor" (the driver
numbers its GPU instances in the same probe order). Only the GPUs this process was given are judged: the kernel log is
the host's, and another container's GPU is not this one's to answer for.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from envcheck.checks.gpu_health.node import PASSED_THROUGH, GpuFinding, given
from envcheck.checks.gpu_health.xid import pci_key
from envcheck.core.result import FaultClass

# Finding codes this module emits (each one is in envcheck.cluster.finding_codes.TABLE).
API_MISMATCH = "driver.api_mismatch"
BAR_INVALID = "gpu.bar_invalid"
CLAIMED = "gpu.claimed_by_other_driver"
GSP_TIMEOUT = "gpu.gsp_timeout"
INIT_FAILED = "gpu.init_failed"
LOAD_FAILED = "driver.load_failed"
OPEN_MODULE = "gpu.open_module_required"
PROBE_FAILED = "gpu.probe_failed"
UNSUPPORTED = "gpu.unsupported_by_driver"

REBOOT_FIX = (
    "reboot the node so the loaded kernel module is the installed driver's (or unload and reload it: "
    "rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia; modprobe nvidia); cat /proc/driver/nvidia/version "
    "and nvidia-smi must then agree"
)
SEATING_FIX = (
    "drain; lspci -vv -s {pci} (is it on the bus, at what link?); reboot the node; if it recurs reseat the GPU "
    "and check its power and riser; RMA if it persists"
)
_FIX = {
    "open_module_required": (
        "install the NVIDIA open kernel modules of the same driver version (the '-open' driver package, or the "
        ".run installer's -m=kernel-open), then reboot: this GPU is driven by the open modules only"
    ),
    "not_supported": (
        "install a driver release that supports this GPU (NVIDIA's supported-products list for the release); "
        "lspci -nn -s {pci} gives its PCI ID"
    ),
    "bar_invalid": (
        "in the system BIOS enable 'Above 4G Decoding' (and 'Resizable BAR' / a larger MMIO window where offered) "
        "so the GPU's BARs get an address, or boot Linux with pci=realloc; then reboot"
    ),
    "init_failed": (
        "drain; dmesg | grep NVRM (the lines before it name the cause: GSP, BAR, firmware); nvidia-smi -q -i {pci}; "
        "reboot the node; if it persists reseat the GPU, check its power, RMA"
    ),
    "gsp_timeout": "drain; nvidia-smi -r -i {pci} (GPU reset) or reboot the node; update the driver if it recurs",
    "probe_failed": SEATING_FIX,
    "probe_not_called": (
        "another kernel driver owns the GPU (lspci -k -s {pci}: 'Kernel driver in use'): blacklist nouveau "
        "(/etc/modprobe.d/blacklist-nouveau.conf, update-initramfs -u) or unbind vfio-pci, then reboot"
    ),
    "no_devices": "the nvidia module did not load: dmesg | grep NVRM names why; fix that cause and reboot",
}
_PROBLEM = {
    "open_module_required": "the loaded NVIDIA module cannot drive it: it requires the NVIDIA open kernel modules",
    "not_supported": "the loaded driver release does not support this GPU",
    "bar_invalid": "its PCI BAR{bar} got no usable address ({size_mib} MiB): the driver refused to probe it",
    "init_failed": "the driver could not initialise it (RmInitAdapter failed, status {status})",
    "gsp_timeout": "its GSP firmware stopped answering the driver (RPC timeout)",
    "probe_failed": "the driver's probe failed for it",
}
_CODE = {
    "open_module_required": OPEN_MODULE,
    "not_supported": UNSUPPORTED,
    "bar_invalid": BAR_INVALID,
    "init_failed": INIT_FAILED,
    "gsp_timeout": GSP_TIMEOUT,
    "probe_failed": PROBE_FAILED,
    "probe_not_called": CLAIMED,
    "no_devices": LOAD_FAILED,
}
_PROBE_CAUSES = (
    "open_module_required",
    "not_supported",
    "bar_invalid",
)  # each names one GPU the probe refused


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


def _where(entry: Mapping[str, Any], minors: Mapping[int, str]) -> str | None:
    """The PCI key an entry names: its own, else its device minor's, else its GPU index's (the same numbering)."""
    if isinstance(entry.get("pci"), str):
        return pci_key(entry["pci"])
    for field in ("minor", "gpu_index"):
        if isinstance(entry.get(field), int):
            return minors.get(entry[field])
    return None


def _nvml_reads(data: Mapping[str, Any]) -> set[str]:
    """The GPUs (PCI keys) NVML lists and reads without a per-GPU error now."""
    gpus = [g for g in data.get("gpus") or [] if isinstance(g, dict)]
    return {
        k for g in gpus if isinstance(g.get("pci"), str) and not g.get("error") and (k := pci_key(g["pci"]))
    }


def _finding(kind: str, entry: Mapping[str, Any], key: str | None, rank: int, note: str = "") -> GpuFinding:
    pci = f"{key}.0" if key else "<PCI address>"
    where = f"PCI {pci}" if key else _unnamed(entry)
    count = int(entry.get("count") or 1)
    said = f"{count}x in the kernel log: " if count > 1 else "kernel log: "
    problem = _PROBLEM[kind].format(**{"bar": "", "size_mib": "?", "status": "?", **entry}) + note
    return GpuFinding(
        f"{problem}; {said}{entry.get('text', '')}",
        _FIX[kind].format(pci=pci),
        FaultClass.NODE,
        code=_CODE[kind],
        rank=rank,
        gpu=where,
        who=where,
    )


def _unnamed(entry: Mapping[str, Any]) -> str:
    for field, name in (("minor", "device minor"), ("gpu_index", "GPU index")):
        if isinstance(entry.get(field), int):
            return f"GPU ({name} {entry[field]}, not in /proc/driver/nvidia/gpus)"
    return "a GPU the log does not name"


def driver_findings(data: Mapping[str, Any]) -> list[GpuFinding]:
    """Findings for the kernel log's driver events (`kernel_log.driver`), among the GPUs this process was given."""
    log = data.get("kernel_log")
    entries = [e for e in (log.get("driver") if isinstance(log, dict) else None) or [] if isinstance(e, dict)]
    alloc, minors, reads = given(data), minor_map(data), _nvml_reads(data)
    out: list[GpuFinding] = []
    named: set[str] = set()

    def ours(key: str | None) -> bool:
        return alloc.ours(key) if key else alloc.whole_node

    init = _merge_init(entries, minors)
    for key, entry in init.items():
        if ours(key):
            earlier = key in reads if key else False  # NVML reads it now: a later open initialised it
            note = ", earlier; NVML reads it now" if earlier else ""
            out.append(_finding("init_failed", entry, key, 4 if earlier else 0, note))
            named.add(key or "")
    for entry in entries:
        kind, key = str(entry.get("kind")), _where(entry, minors)
        if kind in _PROBE_CAUSES + ("gsp_timeout",) and ours(key):
            out.append(_finding(kind, entry, key, 1 if kind == "gsp_timeout" else 0))
            named.add(key or "")
        elif kind == "gsp_rate_limited" and ours(key):
            out.append(_finding("gsp_timeout", entry, key, 1))
    out += _probe_counts(entries, data, named, ours)
    return out


def _merge_init(
    entries: Sequence[Mapping[str, Any]], minors: Mapping[int, str]
) -> dict[str | None, dict[str, Any]]:
    """RmInitAdapter's and rm_init_adapter's lines of one GPU as one entry (the second names the minor)."""
    merged: dict[str | None, dict[str, Any]] = {}
    for entry in entries:
        if entry.get("kind") not in ("init_failed", "init_failed_minor"):
            continue
        key = _where(entry, minors)
        into = merged.setdefault(key, {"count": 0})
        if entry.get("kind") == "init_failed":
            into.update({k: v for k, v in entry.items() if k in ("status", "text", "boot_s")})
            into["count"] = max(into["count"], int(entry.get("count") or 1))
        else:
            into.setdefault("text", entry.get("text"))
            into.setdefault("minor", entry.get("minor"))
            into["count"] = max(into["count"], int(entry.get("count") or 1))
    return merged


def _probe_counts(
    entries: Sequence[Mapping[str, Any]],
    data: Mapping[str, Any],
    named: set[str],
    ours: Callable[[str | None], bool],
) -> list[GpuFinding]:
    """'probe routine failed / not called for N device(s)' and a load that initialised no GPU: named by the GPUs on
    the PCI bus that the driver did not take, when no more precise message already named them."""
    bus = data.get("pci_gpus")
    raw = data.get("pci_drivers")
    drivers: dict[str, Any] = raw if isinstance(raw, dict) else {}
    taken = set(minor_map(data).values())
    fell = {pci_key(b["pci"]) for b in _log_list(data, "bus") if isinstance(b.get("pci"), str)}
    untaken = [
        a
        for a in (bus if isinstance(bus, list) else [])
        if isinstance(a, str)
        and (key := pci_key(a))
        and key not in taken
        and key not in named
        and key not in fell
        and drivers.get(a) not in PASSED_THROUGH
    ]
    out = []
    for entry in entries:
        kind = str(entry.get("kind"))
        if kind not in ("probe_failed", "probe_not_called", "no_devices"):
            continue
        devices = int(entry.get("devices") or 0)
        explained = len(named | fell) >= devices if kind == "probe_failed" and devices else False
        if explained:
            continue
        if kind == "probe_not_called" and drivers and not untaken:
            continue  # every GPU the driver did not get is passed through (vfio-pci): deliberate
        targets: list[str | None] = [a for a in untaken if ours(pci_key(a))] or [None]
        for address in targets[: devices or len(targets)]:
            key = pci_key(address) if address else None
            rank = 1 if kind == "no_devices" else 0
            out.append(
                GpuFinding(
                    f"{_count_problem(kind, devices, drivers.get(address or ''))}; kernel log: {entry.get('text', '')}",
                    _FIX[kind].format(pci=f"{key}.0" if key else "<PCI address>"),
                    FaultClass.NODE,
                    code=_CODE[kind],
                    rank=rank,
                    gpu=f"PCI {key}.0" if key else "GPUs",
                    who=f"PCI {key}.0" if key else "the node",
                )
            )
    return out


def _count_problem(kind: str, devices: int, driver: str | None) -> str:
    if kind == "probe_failed":
        return f"the driver's probe failed for {devices} GPU(s): on the PCI bus, not taken by the driver"
    if kind == "probe_not_called":
        owner = f" ({driver} owns it)" if driver else ""
        return (
            f"another kernel driver owns {devices} NVIDIA GPU(s){owner}: the nvidia module never probed them"
        )
    return "the nvidia module's load failed: it initialised no GPU"


def _log_list(data: Mapping[str, Any], name: str) -> list[dict[str, Any]]:
    log = data.get("kernel_log")
    items = log.get(name) if isinstance(log, dict) else None
    return [i for i in items or [] if isinstance(i, dict)]


def bus_is_named(data: Mapping[str, Any]) -> set[str]:
    """The PCI keys the kernel log's fell-off-the-bus and driver messages name (gpu.lost then says no more)."""
    minors = minor_map(data)
    keys = {pci_key(b["pci"]) for b in _log_list(data, "bus") if isinstance(b.get("pci"), str)}
    keys |= {_where(e, minors) for e in _log_list(data, "driver")}
    return {k for k in keys if k}
