"""GPU hardware health from NVML, as warnings naming the GPU: Xid events, ECC errors, retired pages and remapped
rows, a PCIe link below its maximum, clock slowdowns, persistence mode.

Cheap reads only, no torch and no CUDA context: DCGM's diagnostics stay DCGM's job. Every field is read on its
own: NOT_SUPPORTED (consumer GPUs have no ECC or row remapping) is recorded as `absent('not supported')` and
never warns; any other error is recorded as its text. NVML keeps no cheap Xid history, so Xids come from the
kernel log (envcheck.checks.gpu_health.xid). A replayable Section: `envcheck explain` judges a bundle's `gpu_health`
exactly as the live check judges the host.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from envcheck.checks.gpu_health.node import Finding, bus_findings, hang_finding, missing_findings
from envcheck.checks.gpu_health.xid import capture_xids, escalated, meaning_of, pci_key
from envcheck.core.check import CheckSpec, Context
from envcheck.core.errors import UsageError
from envcheck.core.result import Result, failed, first_of, passed, skipped, warned
from envcheck.core.section import Section, require
from envcheck.probe.kernel_log import KMSG
from envcheck.probe.nvml import NVML_BUDGET_S, hang_text, read_nvml
from envcheck.probe.nvml import text as _text
from envcheck.probe.pci import SYSFS_PCI, pci_gpus
from envcheck.probe.system import absent, is_absent

NOT_SUPPORTED = "not supported"
# nvmlClocksEventReason* bits (nvml.h; the deprecated ClocksThrottleReason* bits have the same values).
GPU_IDLE = 0x1
HW_SLOWDOWN, SW_THERMAL, HW_THERMAL, HW_POWER_BRAKE = 0x8, 0x20, 0x40, 0x80
# Only these warn: idle, application clocks, SW power cap and sync boost are normal operation.
SLOWDOWNS = {HW_THERMAL: "HW thermal slowdown", HW_POWER_BRAKE: "HW power brake slowdown",
             SW_THERMAL: "SW thermal slowdown", HW_SLOWDOWN: "HW slowdown"}
LOST = ("GPU is lost", "GPU requires restart")  # NVML errors that are the GPU's own state, not the query's
RESET = "nvidia-smi -r -i {i} (GPU reset)"
LOST_FIX = f"drain; {RESET} or reboot the node; RMA if it recurs"
PCIE_FIX = ("reseat the GPU and its riser, check the slot: nvidia-smi -q -d PCIE -i {i}; "
            "lspci -vv -s {pci} | grep -E 'LnkCap|LnkSta'")
PERSISTENCE_FIX = "sudo nvidia-smi -pm 1, or run nvidia-persistenced (systemctl enable --now nvidia-persistenced)"
_INIT_HINTS: dict[Any, str] = {12: " (no NVIDIA driver here, or libnvidia-ml.so.1 is not mounted into the container)",
               9: " (the nvidia kernel module is not loaded)"}
_FIELDS: dict[str, tuple[type | None, ...]] = {
    "index": (int,), "error": (str,), "name": (str, dict), "uuid": (str, dict), "pci": (str, dict),
    "persistence": (bool, dict), "retired_pages_pending": (bool, dict), "remapped_rows": (dict,),
    **{f"ecc_{c}_{e}": (int, dict) for c in ("volatile", "aggregate") for e in ("corrected", "uncorrected")},
    **{k: (int, dict) for k in ("retired_pages_sbe", "retired_pages_dbe", "pcie_gen", "pcie_gen_max",
                                "pcie_width", "pcie_width_max", "clock_events", "temperature_c")},
}

_FIELD_NAMES = {"ecc": "ECC", "retired": "retired pages", "remapped": "remapped rows", "pcie": "PCIe link",
                "clock": "clock events", "persistence": "persistence mode", "temperature": "temperature"}




def _reader(pynvml: Any) -> Callable[..., Any]:
    """read(call, *args, convert=f): f(pynvml.call(*args)), or absent('not supported' | '<call>: <error>')."""
    not_supported = getattr(pynvml, "NVML_ERROR_NOT_SUPPORTED", 3)

    def read(call: str, *args: Any, convert: Callable[[Any], Any] = lambda v: v) -> Any:
        fn = getattr(pynvml, call, None)
        if fn is None:
            return absent(f"{call}: not in these NVML bindings")
        try:
            return convert(fn(*args))
        except Exception as exc:  # pynvml.NVMLError and its subclasses; odd values from old bindings
            if getattr(exc, "value", None) == not_supported:
                return absent(NOT_SUPPORTED)
            return absent(f"{call}: {exc or type(exc).__name__}")
    return read


def _rows(t: Any) -> dict[str, Any]:
    return {"corrected": int(t[0]), "uncorrected": int(t[1]), "pending": bool(t[2]), "failure": bool(t[3])}


def _gpu(pynvml: Any, read: Callable[..., Any], i: int) -> dict[str, Any]:
    try:
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
    except Exception as exc:
        return {"index": i, "error": f"nvmlDeviceGetHandleByIndex: {exc or type(exc).__name__}"}
    gpu: dict[str, Any] = {
        "index": i, "name": read("nvmlDeviceGetName", h, convert=_text),
        "uuid": read("nvmlDeviceGetUUID", h, convert=_text),
        "pci": read("nvmlDeviceGetPciInfo", h, convert=lambda p: _text(p.busId)),
        "persistence": read("nvmlDeviceGetPersistenceMode", h, convert=lambda v: int(v) == 1)}
    for counter, cname in ((getattr(pynvml, "NVML_VOLATILE_ECC", 0), "volatile"),
                           (getattr(pynvml, "NVML_AGGREGATE_ECC", 1), "aggregate")):
        for kind, kname in ((getattr(pynvml, "NVML_MEMORY_ERROR_TYPE_CORRECTED", 0), "corrected"),
                            (getattr(pynvml, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1), "uncorrected")):
            gpu[f"ecc_{cname}_{kname}"] = read("nvmlDeviceGetTotalEccErrors", h, kind, counter, convert=int)
    for cause, key in ((0, "retired_pages_sbe"), (1, "retired_pages_dbe")):  # nvmlPageRetirementCause_t
        gpu[key] = read("nvmlDeviceGetRetiredPages", h, cause, convert=len)
    gpu["retired_pages_pending"] = read("nvmlDeviceGetRetiredPagesPendingStatus", h, convert=lambda v: int(v) == 1)
    gpu["remapped_rows"] = read("nvmlDeviceGetRemappedRows", h, convert=_rows)
    for key, call in (("pcie_gen", "CurrPcieLinkGeneration"), ("pcie_gen_max", "MaxPcieLinkGeneration"),
                      ("pcie_width", "CurrPcieLinkWidth"), ("pcie_width_max", "MaxPcieLinkWidth")):
        gpu[key] = read(f"nvmlDeviceGet{call}", h, convert=int)
    events = read("nvmlDeviceGetCurrentClocksEventReasons", h, convert=int)
    if is_absent(events) and events["absent"] != NOT_SUPPORTED:  # bindings or driver older than the rename
        older = read("nvmlDeviceGetCurrentClocksThrottleReasons", h, convert=int)
        events = older if not is_absent(older) or older["absent"] == NOT_SUPPORTED else events
    gpu["clock_events"] = events
    gpu["temperature_c"] = read("nvmlDeviceGetTemperature", h, getattr(pynvml, "NVML_TEMPERATURE_GPU", 0),
                                convert=int)
    return gpu


def _nvml_state(state: dict[str, Any]) -> Callable[[Any, dict[str, Any]], None]:
    """The NVML body filling `state`: nvml_error, driver_version, and gpus one by one (`progress`: the call and
    the GPU being read, for the evidence of a hang)."""
    def fill(pynvml: Any, progress: dict[str, Any]) -> None:
        read = _reader(pynvml)
        progress["call"] = "nvmlSystemGetDriverVersion"
        state["driver_version"] = read("nvmlSystemGetDriverVersion", convert=_text)
        progress["call"] = "nvmlDeviceGetCount"
        count = read("nvmlDeviceGetCount", convert=int)
        if is_absent(count):
            state["nvml_error"] = f"NVML cannot count the GPUs: {count['absent']}"
            return
        for i in range(count):
            progress.update(gpu=i, call=f"NVML reads of GPU {i}")
            state["gpus"].append(_gpu(pynvml, read, i))
        progress.update(gpu=None, call=None)
    return fill


def _unavailable(state: dict[str, Any]) -> Callable[[BaseException], None]:
    def unavailable(exc: BaseException) -> None:
        state["nvml_error"] = ("NVML bindings not installed (pip install nvidia-ml-py)" if isinstance(exc, ImportError)
                               else f"NVML could not start: {exc}{_INIT_HINTS.get(getattr(exc, 'value', None), '')}")
    return unavailable


def capture(kmsg: str = KMSG, nvml_budget_s: float = NVML_BUDGET_S, sysfs: str = SYSFS_PCI) -> dict[str, Any]:
    """Each GPU's NVML health fields, the kernel log's Xid and bus events, and the GPUs on the PCI bus;
    `nvml_error` says why NVML cannot tell, `nvml_hang` is the evidence of an NVML call that did not return.

    NVML runs through probe.nvml.read_nvml (a thread with a time budget): a GPU in a bad state can hang NVML
    calls, and then the kernel log and the GPUs read so far still come back, with the hang named."""
    state: dict[str, Any] = {"nvml_error": None, "driver_version": None, "gpus": []}
    out: dict[str, Any] = {"kernel_log": capture_xids(kmsg), "pci_gpus": pci_gpus(sysfs)}
    got = read_nvml(_nvml_state(state), _unavailable(state), nvml_budget_s)
    out.update(nvml_error=state["nvml_error"], driver_version=state["driver_version"], gpus=list(state["gpus"]),
               nvml_hung=None, nvml_hang=got.hang)
    if got.hang is not None:  # the reader is left behind as a daemon thread: it ends with this process
        at = got.progress.get("gpu")
        out.update(nvml_error=hang_text(got.hang) + (f" (reading GPU {at})" if at is not None else ""),
                   nvml_hung=at if at is not None else -1)
    return out


DRAIN_RANK = 1  # findings up to this rank fail the check (a node fault: a prolog drains, npd reports a problem)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _label(gpu: Mapping[str, Any]) -> str:
    parts = [gpu[k] for k in ("name", "uuid") if isinstance(gpu.get(k), str)]
    if isinstance(gpu.get("pci"), str):
        parts.append(f"PCI {gpu['pci']}")
    return f"GPU {gpu['index']}" + (f" ({', '.join(parts)})" if parts else "")


def _xid_findings(events: list[Mapping[str, Any]], label: str, who: str, i: str) -> list[Finding]:
    out = []
    for e in events:
        m, code = meaning_of(e["xid"]), f"xid.{e['xid']}"
        if (worse := escalated(e["xid"], int(e.get("bursts") or 1))) is not None:
            m, code = worse, f"xid.{e['xid']}.repeated"
        if m.rank is not None:
            text = f": {e['text']}" if e.get("text") else ""
            out.append(Finding(m.rank, label, who, f"Xid {e['xid']} ({m.meaning}), {e.get('count', 1)}x in the "
                               f"kernel log since boot{text}", m.fix.format(i=i), code))
    return out


def _gpu_findings(gpu: Mapping[str, Any], events: list[Mapping[str, Any]]) -> list[Finding]:
    i, label, who = str(gpu["index"]), _label(gpu), f"GPU {gpu['index']}"
    key = pci_key(gpu["pci"]) if isinstance(gpu.get("pci"), str) else None
    pci = f"{key}.0" if key else "<PCI address>"  # lspci's and nvidia-smi's domain:bus:device.function
    out = _xid_findings(events, label, who, i)

    def add(rank: int, problem: str, fix: str) -> None:
        out.append(Finding(rank, label, who, problem, fix.format(i=i, pci=pci)))

    lost = [v["absent"] for v in gpu.values() if is_absent(v) and any(t in v["absent"] for t in LOST)]
    if isinstance(gpu.get("error"), str) or lost:
        add(0, f"NVML cannot read it: {gpu.get('error') or lost[0]}", LOST_FIX)
        out[-1] = replace(out[-1], code="gpu.lost")
    rows = _dict(gpu.get("remapped_rows"))
    if rows.get("failure") is True:
        add(1, "row remapping failed: the GPU memory has no spare rows left for new errors",
            "drain and RMA the GPU (nvidia-smi -q -d ROW_REMAPPER -i {i}: Remapping Failure Occurred: Yes)")
    if rows.get("pending") is True:
        add(1, "a memory row remap is pending: it takes effect at the next GPU reset",
            f"drain, then {RESET} or reboot; nvidia-smi -q -d ROW_REMAPPER -i {{i}}")
    if gpu.get("retired_pages_pending") is True:
        add(1, "memory pages are pending retirement: they take effect at the next GPU reset or driver reload",
            f"drain, then {RESET} or reboot; nvidia-smi -q -d PAGE_RETIREMENT -i {{i}}")
    volatile = _int(gpu.get("ecc_volatile_uncorrected"))
    if volatile:
        add(1, f"{volatile} uncorrectable ECC error(s) since the driver loaded",
            f"drain; nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER -i {{i}}; {RESET}; RMA if they recur")
    events_mask = _int(gpu.get("clock_events"))
    width, width_max = _int(gpu.get("pcie_width")), _int(gpu.get("pcie_width_max"))
    if width and width_max and width < width_max:
        add(3, f"PCIe link runs at x{width}, below its x{width_max} maximum", PCIE_FIX)
    gen, gen_max = _int(gpu.get("pcie_gen")), _int(gpu.get("pcie_gen_max"))
    # An idle GPU drops its link generation to save power; only a busy one below its maximum is degraded.
    if gen and gen_max and gen < gen_max and events_mask is not None and not events_mask & GPU_IDLE:
        add(3, f"PCIe link runs at gen {gen}, below its gen {gen_max} maximum while the GPU is busy", PCIE_FIX)
    slow = [name for bit, name in SLOWDOWNS.items() if events_mask and events_mask & bit]
    if slow:
        temp = _int(gpu.get("temperature_c"))
        thermal = events_mask is not None and bool(events_mask & (HW_THERMAL | SW_THERMAL))
        brake = events_mask is not None and bool(events_mask & HW_POWER_BRAKE)
        fix = ("check cooling: fans, airflow, inlet temperature (nvidia-smi -q -d TEMPERATURE,PERFORMANCE -i {i})"
               if thermal else "the chassis asserted power brake: check the PSUs and power delivery "
               "(nvidia-smi -q -d POWER,PERFORMANCE -i {i})" if brake else
               "nvidia-smi -q -d PERFORMANCE -i {i} names the cause; check cooling and power delivery")
        add(4, f"clocks held down by {', '.join(slow)}" + (f" at {temp} C" if temp is not None else ""), fix)
    if gpu.get("persistence") is False:
        add(5, "persistence mode is off: the driver tears the GPU down between clients, so every job start pays "
            "its initialisation", PERSISTENCE_FIX)
    return out


def verdict(data: Mapping[str, Any], ctx: Context) -> Result:
    """Warn naming each GPU, most severe first; skip with the reason when NVML cannot run and no Xid shows."""
    gpus = [g for g in data.get("gpus") or [] if isinstance(g, dict)]
    log = _dict(data.get("kernel_log"))
    events = [e for e in log.get("xid") or [] if isinstance(e, dict)]
    by_pci: dict[str, list[Mapping[str, Any]]] = {}
    for e in events:
        by_pci.setdefault(e["pci"], []).append(e)
    findings: list[Finding] = []
    for gpu in gpus:
        key = pci_key(gpu["pci"]) if isinstance(gpu.get("pci"), str) else None
        findings += _gpu_findings(gpu, by_pci.pop(key, []) if key else [])
    hang = hang_finding(data)
    findings += [hang] if hang else []
    findings += bus_findings(log.get("bus") or [], gpus)
    findings += missing_findings(data.get("pci_gpus"), gpus, data)
    for pci, rest in by_pci.items():  # a GPU NVML no longer lists (one that fell off the bus) or cannot read
        findings += _xid_findings(rest, f"PCI {pci} (no GPU that NVML lists)", f"PCI {pci}", f"{pci}.0")
    nvml_error = data.get("nvml_error")
    log_note = f"Xid history unknown ({log['error']})" if log.get("error") else (
        f"kernel log: {len(events)} kind(s) of Xid" if events else "kernel log: no Xid")
    measured: dict[str, Any] = {"gpus": len(gpus), "driver_version": data.get("driver_version"),
                                "nvml_error": nvml_error, "kernel_log": log.get("error") or log.get("source"),
                                "xid": events}
    if findings:
        findings.sort(key=lambda f: f.rank)
        measured["findings"] = [{"gpu": f.gpu, "problem": f.problem, "fix": f.fix} for f in findings]
        measured["codes"] = list(dict.fromkeys(f.code for f in findings))
        fixes = " | ".join(dict.fromkeys(f"{f.who}: {f.fix}" for f in findings))
        judge = failed if findings[0].rank <= DRAIN_RANK else warned
        return judge(first_of([f"{f.gpu}: {f.problem}" for f in findings]), fixes, measured=measured,
                     fault_class="node", code=findings[0].code)
    if nvml_error or not gpus:
        return skipped(f"NVML cannot tell the GPUs' health: {nvml_error or 'NVML lists no GPU'}", measured=measured)
    unsupported: list[str] = sorted({_FIELD_NAMES.get(str(k).split("_")[0], str(k)) for g in gpus
                                     for k, v in g.items() if is_absent(v) and v["absent"] == NOT_SUPPORTED})
    apps = [f"Xid {e['xid']} {e.get('count', 1)}x" for e in events if meaning_of(e["xid"]).rank is None]
    notes = [log_note]
    if unsupported:
        notes.append(f"not supported here: {', '.join(unsupported)}")
    if apps:
        notes.append(f"{', '.join(apps)} (application errors, not the node)")
    measured["not_supported"] = unsupported
    return passed(f"{len(gpus)} GPU(s) healthy by NVML (persistence mode, ECC, retired pages, remapped rows, PCIe "
                  f"link, clock slowdowns); {'; '.join(notes)}", measured=measured)


def validate(data: Any, where: str) -> None:
    """One-line UsageError naming the first thing malformed in a bundle's gpu_health section."""
    require(data, where, {"nvml_error": (str, None), "driver_version": (str, dict, None), "gpus": (list,),
                          "kernel_log": (dict,), "nvml_hung": (int, None), "nvml_hang": (dict, None),
                          "pci_gpus": (list, str)})
    for n, gpu in enumerate(data.get("gpus") or []):
        require(gpu, f"{where}.gpus[{n}]", _FIELDS)
        if "index" not in gpu:
            raise UsageError(f"{where}.gpus[{n}] lacks 'index'")
        if isinstance(gpu.get("remapped_rows"), dict) and not is_absent(gpu["remapped_rows"]):
            require(gpu["remapped_rows"], f"{where}.gpus[{n}].remapped_rows",
                    {"corrected": (int,), "uncorrected": (int,), "pending": (bool,), "failure": (bool,)})
    log = data.get("kernel_log")
    if log is not None:
        require(log, f"{where}.kernel_log", {"source": (str,), "error": (str, None), "xid": (list,), "bus": (list,),
                                             "window": (dict,), "cursor_error": (str,)})
        for n, event in enumerate(log.get("xid") or []):
            require(event, f"{where}.kernel_log.xid[{n}]", {"pci": (str,), "xid": (int,), "count": (int,),
                                                            "text": (str,), "boot_s": (float, int, None),
                                                            "bursts": (int,)})
            if "pci" not in event or "xid" not in event:
                raise UsageError(f"{where}.kernel_log.xid[{n}] needs 'pci' and 'xid'")


SECTION = Section("gpu_health", "gpu.health", capture, validate, verdict)


def gpu_health(ctx: Context) -> Result:
    """NVML's view of each GPU's hardware state, plus the kernel log's Xids, as warnings naming the GPU."""
    return SECTION.judge(ctx)


CHECKS = (
    # Its own group: NVML touches no CUDA context, and a call that hangs on a lost GPU takes no other check down.
    CheckSpec("gpu.health", gpu_health, "NVML hardware state: Xid, ECC, retired pages/remapped rows, PCIe link, "
              "clock slowdowns, persistence mode", timeout_s=30, group="nvml", uses_gpu=False),
)
