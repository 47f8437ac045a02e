"""gpu.health's verdict: the captured NVML fields and kernel-log events judged as findings naming the GPU (pure; the
live check and `envcheck explain` both call it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envcheck.checks.gpu_health.driver_findings import bus_is_named, driver_findings, quiet
from envcheck.checks.gpu_health.fabric_findings import fabric_manager_text, most_up, wired
from envcheck.checks.gpu_health.gpu_findings import (
    NOT_SUPPORTED_NAMES,
    NodeView,
    as_dict,
    busy,
    gpu_findings,
    xid_findings,
)
from envcheck.checks.gpu_health.node import (
    GPU_LOST,
    GpuFinding,
    bus_findings,
    drained,
    given,
    hang_finding,
    hidden,
    missing_findings,
    warmup_finding,
)
from envcheck.checks.gpu_health.nvml_down import mismatch_findings, nvml_down_findings
from envcheck.checks.gpu_health.xid import meaning_of, pci_key
from envcheck.core.check import Context
from envcheck.core.result import FaultClass, Result, errored, failed, first_of, passed, skipped, warned
from envcheck.probe.nvml_fields import NOT_SUPPORTED
from envcheck.probe.system import is_absent

# Finding codes this module emits (each one is in envcheck.cluster.finding_codes.TABLE).
KERNEL_LOG_UNREADABLE = "gpu.kernel_log_unreadable"

# The modes that judge a node (the torch-free node path): there, what envcheck could not read is said out loud.
NODE_MODES = ("prolog", "health", "npd")
KERNEL_LOG_FIX = (
    "give envcheck the kernel log: run it as root, or with CAP_SYSLOG (a container: --cap-add SYSLOG "
    "and /dev/kmsg), or sysctl kernel.dmesg_restrict=0"
)

DRAIN_RANK = (
    1  # findings up to this rank fail the check (a node fault: a prolog drains, npd reports a problem)
)


def node_view(data: Mapping[str, Any], gpus: list[dict[str, Any]]) -> NodeView:
    """What the node says around each GPU: whether its NVLinks are wired, what was read of the fabric manager."""
    switches = data.get("nvswitches")
    count = len(switches) if isinstance(switches, list) else 0
    return NodeView(wired(gpus, count), fabric_manager_text(data.get("daemons")), most_up(gpus))


def _findings(data: Mapping[str, Any], ctx: Context, notes: list[str]) -> list[GpuFinding]:
    """Every finding: each GPU NVML lists (its fields and Xids), NVML hangs and slow starts, the kernel log's driver
    messages, GPUs lost from NVML, Xids of GPUs NVML no longer lists, and the driver's two halves' versions; where two
    sources disagree, `notes` says which was followed."""
    gpus = [g for g in data.get("gpus") or [] if isinstance(g, dict)]
    log = as_dict(data.get("kernel_log"))
    by_pci: dict[str, list[Mapping[str, Any]]] = {}
    for e in log.get("xid") or []:
        if isinstance(e, dict):
            by_pci.setdefault(str(e.get("pci")), []).append(e)
    windowed = as_dict(log.get("window")).get("since_s") is not None
    findings: list[GpuFinding] = []
    named = bus_is_named(data)  # GPUs whose failure the kernel log explains: its finding names the cause
    view = node_view(data, gpus)
    for gpu in gpus:
        key = pci_key(gpu["pci"]) if isinstance(gpu.get("pci"), str) else None
        own = gpu_findings(gpu, by_pci.pop(key, []) if key else [], windowed, view, notes)
        findings += [f for f in own if not (key in named and f.code == GPU_LOST)]
    slow = hang_finding(data) or warmup_finding(data)
    findings += [slow] if slow else []
    alloc = given(data)
    findings += bus_findings(log.get("bus") or [], gpus, alloc)
    findings += driver_findings(data)
    findings += missing_findings(data.get("pci_gpus"), gpus, data, explained=named)
    for pci, rest in by_pci.items():  # a GPU NVML no longer lists (one that fell off the bus) or cannot read
        if alloc.ours(pci):  # another container's GPU: its Xids are not this process's to judge
            findings += xid_findings(
                rest, f"PCI {pci} (no GPU that NVML lists)", f"PCI {pci}", f"{pci}.0", windowed
            )
    findings += mismatch_findings(data)
    node_mode = ctx.options.cluster_mode in NODE_MODES
    blind = data.get("nvml_error") or not gpus  # NVML cannot start, or lists no GPU
    # envcheck's own reader failing after NVML started is no cause of an NVML that cannot start
    if (
        node_mode
        and blind
        and not data.get("reader_error")
        and not any(f.rank <= DRAIN_RANK for f in findings)
    ):
        findings += nvml_down_findings(data)
    if log.get("error") and node_mode:
        findings.append(
            GpuFinding(
                f"the kernel log cannot be read ({log['error']}): Xid and fallen-off-the-bus history not judged",
                KERNEL_LOG_FIX,
                FaultClass.CONFIG,
                code=KERNEL_LOG_UNREADABLE,
                rank=6,
                gpu="kernel log",
                who="envcheck",
            )
        )
    return findings


def verdict(data: Mapping[str, Any], ctx: Context) -> Result:
    """Fail or warn naming each GPU, most severe first. When NVML cannot run and nothing else is found: a skip off
    the node path; on it (prolog, health, npd) "cannot judge", an ERROR naming what was read."""
    gpus = [g for g in data.get("gpus") or [] if isinstance(g, dict)]
    log = as_dict(data.get("kernel_log"))
    events = [e for e in log.get("xid") or [] if isinstance(e, dict)]
    notes: list[str] = []
    findings = _findings(data, ctx, notes)
    alloc = given(data)
    nvml_error = data.get("nvml_error")
    not_here = hidden(data)
    in_use = busy(gpus)
    measured: dict[str, Any] = {
        "gpus": len(gpus),
        "driver_version": data.get("driver_version"),
        "nvml_error": nvml_error,
        "kernel_log": log.get("error") or log.get("source"),
        "xid": events,
        "driver_events": [e for e in log.get("driver") or [] if isinstance(e, dict)],
        "given": alloc.describe(),
        "not_given": not_here,
        "busy": in_use,
        "drained": drained(data),
        "disagreements": notes,
    }
    if isinstance(data.get("warmup"), dict):
        measured["init_s"] = data["warmup"].get("seconds")
    if findings:
        findings.sort(key=lambda f: (f.rank, f.code == GPU_LOST))  # a cause the log names before "lost"
        measured["findings"] = [
            {"gpu": f.gpu, "problem": f.problem, "fix": f.fix, "code": f.code} for f in findings
        ]
        measured["codes"] = list(dict.fromkeys(f.code for f in findings))
        fixes = " | ".join(dict.fromkeys(f"{f.who}: {f.fix}" for f in findings))
        judge = failed if findings[0].rank <= DRAIN_RANK else warned
        return judge(
            first_of([f"{f.gpu}: {f.problem}" for f in findings]),
            fixes,
            measured=measured,
            fault_class=findings[0].fault_class,
            code=findings[0].code,
        )
    if nvml_error or not gpus:
        why = f"NVML cannot tell the GPUs' health: {nvml_error or 'NVML lists no GPU'}"
        listed = data.get("pci_gpus")
        bus = (
            [a for a in listed if isinstance(a, str) and pci_key(a) not in quiet(data)]
            if isinstance(listed, list)
            else []
        )
        if isinstance(listed, list) and not listed:  # sysfs is not namespaced: no NVIDIA GPU on this machine
            return skipped(f"{why}; no NVIDIA GPU on this node's PCI bus", measured=measured)
        if isinstance(listed, list) and listed and not bus:  # every GPU is a VM's (vfio-pci) or excluded
            return skipped(
                f"no GPU here is the host driver's: {len(listed)} bound to vfio-pci or excluded",
                measured=measured,
            )
        if ctx.options.cluster_mode in NODE_MODES and (nvml_error or bus):
            read = "the kernel log" if not log.get("error") else f"not the kernel log ({log['error']})"
            return errored(
                f"cannot judge the GPUs: {why}; nothing in {read}, /proc/driver/nvidia or sysfs explains it",
                measured=measured,
            )
        return skipped(why, measured=measured)
    return passed(
        _healthy(gpus, events, log, data, notes), measured=measured | {"not_supported": _unsupported(gpus)}
    )


def _unsupported(gpus: list[dict[str, Any]]) -> list[str]:
    return sorted(
        {
            NOT_SUPPORTED_NAMES.get(str(k).split("_")[0], str(k))
            for g in gpus
            for k, v in g.items()
            if is_absent(v) and v["absent"] == NOT_SUPPORTED
        }
    )


def _healthy(
    gpus: list[dict[str, Any]],
    events: list[dict[str, Any]],
    log: Mapping[str, Any],
    data: Mapping[str, Any],
    notes: list[str],
) -> str:
    """The summary of a pass: what was checked, and what was seen that is not the node's."""
    alloc, not_here = given(data), hidden(data)
    said = [
        f"Xid history unknown ({log['error']})"
        if log.get("error")
        else (f"kernel log: {len(events)} kind(s) of Xid" if events else "kernel log: no Xid")
    ]
    if not_here:
        said.append(
            f"{len(not_here)} of the node's GPUs are not this process's ({alloc.describe()}): not judged"
        )
    said += busy(gpus)
    unsupported = _unsupported(gpus)
    if unsupported:
        said.append(f"not supported here: {', '.join(unsupported)}")
    apps = [f"Xid {e['xid']} {e.get('count', 1)}x" for e in events if meaning_of(e["xid"]).rank is None]
    if apps:
        said.append(f"{', '.join(apps)} (application errors, not the node)")
    away = drained(data)
    if away:
        said.append(f"{len(away)} GPU(s) drained by an operator (NVML's drain state: {', '.join(away[:4])})")
    said += notes
    return f"{len(gpus)} GPU(s) healthy by NVML ({', '.join(_read(gpus))}); {'; '.join(said)}"


# What a pass names as checked: each field's words, and the key NVML answered it in (absent: not read, not named).
_JUDGED = (
    ("persistence mode", "persistence"),
    ("ECC", "ecc_volatile_uncorrected"),
    ("retired pages", "retired_pages_pending"),
    ("remapped rows", "remapped_rows"),
    ("PCIe link", "pcie_width"),
    ("clock slowdowns", "clock_events"),
    ("NVLink fabric", "fabric"),
    ("NVLinks", "nvlink"),
    ("recovery action", "recovery_action"),
    ("InfoROM", "inforom_valid"),
    ("vGPU licence", "vgpu_license"),
)


def _read(gpus: list[dict[str, Any]]) -> list[str]:
    """The fields NVML answered on at least one GPU, by name: a pass names only what was read. A fabric in state
    'not supported' and a GPU without NVLinks were read, but there is nothing of them to judge."""

    def answered(g: dict[str, Any], key: str) -> bool:
        value = g.get(key)
        if key == "fabric":
            return isinstance(value, dict) and value.get("state") not in (None, 0)
        if key == "nvlink":
            return isinstance(value, dict) and isinstance(value.get("count"), int) and value["count"] > 0
        return key in g and not is_absent(value)

    return [name for name, key in _JUDGED if any(answered(g, key) for g in gpus)] or ["no field answered"]
