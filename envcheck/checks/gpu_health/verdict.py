"""gpu.health's verdict: the captured NVML fields and kernel-log events judged as findings naming the GPU (pure; the
live check and `envcheck explain` both call it), and the shape check of a bundle's gpu_health section."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from envcheck.checks.gpu_health.node import (
    GPU_HEALTH,
    GPU_LOST,
    PERSISTENCE_FIX,
    GpuFinding,
    bus_findings,
    given,
    hang_finding,
    hidden,
    missing_findings,
    warmup_finding,
)
from envcheck.checks.gpu_health.xid import escalated, meaning_of, pci_key
from envcheck.core.check import Context
from envcheck.core.errors import UsageError
from envcheck.core.result import FaultClass, Result, failed, first_of, passed, skipped, warned
from envcheck.core.section import require
from envcheck.probe.gpu_usage import foreign
from envcheck.probe.nvml_fields import NOT_SUPPORTED
from envcheck.probe.system import is_absent

# Finding codes this module emits (each one is in envcheck.cluster.finding_codes.TABLE).
KERNEL_LOG_UNREADABLE = "gpu.kernel_log_unreadable"
PERSISTENCE_OFF = "gpu.persistence_off"

# nvmlClocksEventReason* bits (nvml.h; the deprecated ClocksThrottleReason* bits have the same values).
GPU_IDLE = 0x1
HW_SLOWDOWN, SW_THERMAL, HW_THERMAL, HW_POWER_BRAKE = 0x8, 0x20, 0x40, 0x80
# Only these warn: idle, application clocks, SW power cap and sync boost are normal operation.
SLOWDOWNS = {
    HW_THERMAL: "HW thermal slowdown",
    HW_POWER_BRAKE: "HW power brake slowdown",
    SW_THERMAL: "SW thermal slowdown",
    HW_SLOWDOWN: "HW slowdown",
}
LOST = ("GPU is lost", "GPU requires restart")  # NVML errors that are the GPU's own state, not the query's
RESET = "nvidia-smi -r -i {i} (GPU reset)"
LOST_FIX = f"drain; {RESET} or reboot the node; RMA if it recurs"
PCIE_FIX = (
    "reseat the GPU and its riser, check the slot: nvidia-smi -q -d PCIE -i {i}; "
    "lspci -vv -s {pci} | grep -E 'LnkCap|LnkSta'"
)
_FIELDS: dict[str, tuple[type | None, ...]] = {
    "index": (int,),
    "error": (str,),
    "name": (str, dict),
    "uuid": (str, dict),
    "pci": (str, dict),
    "persistence": (bool, dict),
    "retired_pages_pending": (bool, dict),
    "remapped_rows": (dict,),
    **{f"ecc_{c}_{e}": (int, dict) for c in ("volatile", "aggregate") for e in ("corrected", "uncorrected")},
    **{
        k: (int, dict)
        for k in (
            "retired_pages_sbe",
            "retired_pages_dbe",
            "pcie_gen",
            "pcie_gen_max",
            "pcie_width",
            "pcie_width_max",
            "clock_events",
            "temperature_c",
        )
    },
    "processes": (list,),
    "memory": (dict,),
    "compute_mode": (str,),
    "mig": (bool,),
}
# The modes that judge a node (the torch-free node path): there, what envcheck could not read is said out loud.
NODE_MODES = ("prolog", "health", "npd")
KERNEL_LOG_FIX = (
    "give envcheck the kernel log: run it as root, or with CAP_SYSLOG (a container: --cap-add SYSLOG "
    "and /dev/kmsg), or sysctl kernel.dmesg_restrict=0"
)

_FIELD_NAMES = {
    "ecc": "ECC",
    "retired": "retired pages",
    "remapped": "remapped rows",
    "pcie": "PCIe link",
    "clock": "clock events",
    "persistence": "persistence mode",
    "temperature": "temperature",
}


DRAIN_RANK = (
    1  # findings up to this rank fail the check (a node fault: a prolog drains, npd reports a problem)
)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _label(gpu: Mapping[str, Any]) -> str:
    parts = [gpu[k] for k in ("name", "uuid") if isinstance(gpu.get(k), str)]
    if isinstance(gpu.get("pci"), str):
        parts.append(f"PCI {gpu['pci']}")
    return f"GPU {gpu['index']}" + (f" ({', '.join(parts)})" if parts else "")


def _xid_findings(
    events: list[Mapping[str, Any]], label: str, who: str, i: str, windowed: bool
) -> list[GpuFinding]:
    """One finding per Xid the catalogue ranks. Application Xids (13, 31) escalate when they repeat only inside a
    window the operator set (ENVCHECK_XID_WINDOW_S): since boot, other users' jobs add up to any count."""
    out = []
    for e in events:
        m, code = meaning_of(e["xid"]), f"xid.{e['xid']}"
        if windowed and (worse := escalated(e["xid"], int(e.get("bursts") or 1))) is not None:
            m, code = worse, f"xid.{e['xid']}.repeated"
        if m.rank is not None:
            text = f": {e['text']}" if e.get("text") else ""
            out.append(
                GpuFinding(
                    f"Xid {e['xid']} ({m.meaning}), {e.get('count', 1)}x in the kernel log since boot{text}",
                    m.fix.format(i=i),
                    FaultClass.NODE,
                    code=code,
                    rank=m.rank,
                    gpu=label,
                    who=who,
                )
            )
    return out


def _gpu_findings(
    gpu: Mapping[str, Any], events: list[Mapping[str, Any]], windowed: bool
) -> list[GpuFinding]:
    i, label, who = str(gpu["index"]), _label(gpu), f"GPU {gpu['index']}"
    key = pci_key(gpu["pci"]) if isinstance(gpu.get("pci"), str) else None
    pci = f"{key}.0" if key else "<PCI address>"  # lspci's and nvidia-smi's domain:bus:device.function
    out = _xid_findings(events, label, who, i, windowed)

    def add(rank: int, problem: str, fix: str, code: str = GPU_HEALTH) -> None:
        out.append(
            GpuFinding(
                problem, fix.format(i=i, pci=pci), FaultClass.NODE, code=code, rank=rank, gpu=label, who=who
            )
        )

    lost = [v["absent"] for v in gpu.values() if is_absent(v) and any(t in v["absent"] for t in LOST)]
    if isinstance(gpu.get("error"), str) or lost:
        add(0, f"NVML cannot read it: {gpu.get('error') or lost[0]}", LOST_FIX)
        out[-1] = replace(out[-1], code=GPU_LOST)
    rows = _dict(gpu.get("remapped_rows"))
    if rows.get("failure") is True:
        add(
            1,
            "row remapping failed: the GPU memory has no spare rows left for new errors",
            "drain and RMA the GPU (nvidia-smi -q -d ROW_REMAPPER -i {i}: Remapping Failure Occurred: Yes)",
        )
    if rows.get("pending") is True:
        add(
            1,
            "a memory row remap is pending: it takes effect at the next GPU reset",
            f"drain, then {RESET} or reboot; nvidia-smi -q -d ROW_REMAPPER -i {{i}}",
        )
    if gpu.get("retired_pages_pending") is True:
        add(
            1,
            "memory pages are pending retirement: they take effect at the next GPU reset or driver reload",
            f"drain, then {RESET} or reboot; nvidia-smi -q -d PAGE_RETIREMENT -i {{i}}",
        )
    volatile = _int(gpu.get("ecc_volatile_uncorrected"))
    if volatile:
        add(
            1,
            f"{volatile} uncorrectable ECC error(s) since the driver loaded",
            f"drain; nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER -i {{i}}; {RESET}; RMA if they recur",
        )
    events_mask = _int(gpu.get("clock_events"))
    width, width_max = _int(gpu.get("pcie_width")), _int(gpu.get("pcie_width_max"))
    if width and width_max and width < width_max:
        add(3, f"PCIe link runs at x{width}, below its x{width_max} maximum", PCIE_FIX)
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
        )
    slow = [name for bit, name in SLOWDOWNS.items() if events_mask and events_mask & bit]
    if slow:
        temp = _int(gpu.get("temperature_c"))
        thermal = events_mask is not None and bool(events_mask & (HW_THERMAL | SW_THERMAL))
        brake = events_mask is not None and bool(events_mask & HW_POWER_BRAKE)
        fix = (
            "check cooling: fans, airflow, inlet temperature (nvidia-smi -q -d TEMPERATURE,PERFORMANCE -i {i})"
            if thermal
            else "the chassis asserted power brake: check the PSUs and power delivery "
            "(nvidia-smi -q -d POWER,PERFORMANCE -i {i})"
            if brake
            else "nvidia-smi -q -d PERFORMANCE -i {i} names the cause; check cooling and power delivery"
        )
        add(4, f"clocks held down by {', '.join(slow)}" + (f" at {temp} C" if temp is not None else ""), fix)
    if gpu.get("persistence") is False:
        add(
            5,
            "persistence mode is off: the driver tears the GPU down between clients, so every job start pays "
            "its initialisation",
            PERSISTENCE_FIX,
            code=PERSISTENCE_OFF,
        )
    return out


def _busy(gpus: Sequence[Mapping[str, Any]]) -> list[str]:
    """'GPU 3: 2 process(es) of another job or user (pid 4242 python, ...), 76.0 of 79.6 GiB' for each GPU in use."""
    out = []
    for g in gpus:
        others = foreign(g.get("processes"))
        if others:
            names = ", ".join(
                f"pid {p.get('pid')}" + (f" {p['name']}" if p.get("name") else "") for p in others[:3]
            )
            mem = _dict(g.get("memory"))
            held = (
                f", {mem['used_mib'] / 1024:.1f} of {mem['total_mib'] / 1024:.1f} GiB in use"
                if isinstance(mem.get("used_mib"), int) and isinstance(mem.get("total_mib"), int)
                else ""
            )
            out.append(f"GPU {g['index']} in use by {len(others)} other process(es) ({names}){held}")
    return out


def verdict(data: Mapping[str, Any], ctx: Context) -> Result:
    """Warn naming each GPU, most severe first; skip with the reason when NVML cannot run and no Xid shows."""
    gpus = [g for g in data.get("gpus") or [] if isinstance(g, dict)]
    log = _dict(data.get("kernel_log"))
    events = [e for e in log.get("xid") or [] if isinstance(e, dict)]
    by_pci: dict[str, list[Mapping[str, Any]]] = {}
    for e in events:
        by_pci.setdefault(e["pci"], []).append(e)
    findings: list[GpuFinding] = []
    windowed = _dict(log.get("window")).get("since_s") is not None
    for gpu in gpus:
        key = pci_key(gpu["pci"]) if isinstance(gpu.get("pci"), str) else None
        findings += _gpu_findings(gpu, by_pci.pop(key, []) if key else [], windowed)
    slow = hang_finding(data) or warmup_finding(data)
    findings += [slow] if slow else []
    alloc = given(data)
    findings += bus_findings(log.get("bus") or [], gpus, alloc)
    findings += missing_findings(data.get("pci_gpus"), gpus, data)
    for pci, rest in by_pci.items():  # a GPU NVML no longer lists (one that fell off the bus) or cannot read
        if alloc.ours(pci):  # another container's GPU: its Xids are not this process's to judge
            findings += _xid_findings(
                rest, f"PCI {pci} (no GPU that NVML lists)", f"PCI {pci}", f"{pci}.0", windowed
            )
    if log.get("error") and ctx.options.cluster_mode in NODE_MODES:
        findings.append(
            GpuFinding(
                f"the kernel log cannot be read ({log['error']}): Xid "
                "and fallen-off-the-bus history not judged",
                KERNEL_LOG_FIX,
                FaultClass.CONFIG,
                code=KERNEL_LOG_UNREADABLE,
                rank=6,
                gpu="kernel log",
                who="envcheck",
            )
        )
    nvml_error = data.get("nvml_error")
    log_note = (
        f"Xid history unknown ({log['error']})"
        if log.get("error")
        else (f"kernel log: {len(events)} kind(s) of Xid" if events else "kernel log: no Xid")
    )
    not_here = hidden(data)
    busy = _busy(gpus)
    measured: dict[str, Any] = {
        "gpus": len(gpus),
        "driver_version": data.get("driver_version"),
        "nvml_error": nvml_error,
        "kernel_log": log.get("error") or log.get("source"),
        "xid": events,
        "given": alloc.describe(),
        "not_given": not_here,
        "busy": busy,
    }
    if isinstance(data.get("warmup"), dict):
        measured["init_s"] = data["warmup"].get("seconds")
    if findings:
        findings.sort(key=lambda f: f.rank)
        measured["findings"] = [{"gpu": f.gpu, "problem": f.problem, "fix": f.fix} for f in findings]
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
        return skipped(
            f"NVML cannot tell the GPUs' health: {nvml_error or 'NVML lists no GPU'}", measured=measured
        )
    unsupported: list[str] = sorted(
        {
            _FIELD_NAMES.get(str(k).split("_")[0], str(k))
            for g in gpus
            for k, v in g.items()
            if is_absent(v) and v["absent"] == NOT_SUPPORTED
        }
    )
    apps = [f"Xid {e['xid']} {e.get('count', 1)}x" for e in events if meaning_of(e["xid"]).rank is None]
    notes = [log_note]
    if not_here:
        notes.append(
            f"{len(not_here)} of the node's GPUs are not this process's ({alloc.describe()}): not judged"
        )
    notes += busy
    if unsupported:
        notes.append(f"not supported here: {', '.join(unsupported)}")
    if apps:
        notes.append(f"{', '.join(apps)} (application errors, not the node)")
    measured["not_supported"] = unsupported
    return passed(
        f"{len(gpus)} GPU(s) healthy by NVML (persistence mode, ECC, retired pages, remapped rows, PCIe "
        f"link, clock slowdowns); {'; '.join(notes)}",
        measured=measured,
    )


def validate(data: Any, where: str) -> None:
    """One-line UsageError naming the first thing malformed in a bundle's gpu_health section."""
    require(
        data,
        where,
        {
            "nvml_error": (str, None),
            "driver_version": (str, dict, None),
            "gpus": (list,),
            "kernel_log": (dict,),
            "nvml_hung": (int, None),
            "nvml_hang": (dict, None),
            "pci_gpus": (list, str),
            "access": (dict,),
            "warmup": (dict,),
            "overruns": (int,),
        },
    )
    for n, gpu in enumerate(data.get("gpus") or []):
        require(gpu, f"{where}.gpus[{n}]", _FIELDS)
        if "index" not in gpu:
            raise UsageError(f"{where}.gpus[{n}] lacks 'index'")
        if isinstance(gpu.get("remapped_rows"), dict) and not is_absent(gpu["remapped_rows"]):
            require(
                gpu["remapped_rows"],
                f"{where}.gpus[{n}].remapped_rows",
                {"corrected": (int,), "uncorrected": (int,), "pending": (bool,), "failure": (bool,)},
            )
    log = data.get("kernel_log")
    if log is not None:
        require(
            log,
            f"{where}.kernel_log",
            {
                "source": (str,),
                "error": (str, None),
                "xid": (list,),
                "bus": (list,),
                "window": (dict,),
                "cursor_error": (str,),
            },
        )
        for n, event in enumerate(log.get("xid") or []):
            require(
                event,
                f"{where}.kernel_log.xid[{n}]",
                {
                    "pci": (str,),
                    "xid": (int,),
                    "count": (int,),
                    "text": (str,),
                    "boot_s": (float, int, None),
                    "bursts": (int,),
                },
            )
            if "pci" not in event or "xid" not in event:
                raise UsageError(f"{where}.kernel_log.xid[{n}] needs 'pci' and 'xid'")
