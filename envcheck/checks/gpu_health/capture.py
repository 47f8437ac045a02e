"""gpu.health's capture: each GPU's NVML health fields (through probe.nvml's budgeted reader), the kernel log's Xid
and bus events, and the GPUs on the PCI bus. Every field is read on its own: NOT_SUPPORTED (consumer GPUs have no ECC
or row remapping) is recorded as `absent('not supported')`; any other error as its text."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from envcheck.checks.gpu_health.log_capture import capture_xids
from envcheck.checks.gpu_health.xid import pci_key
from envcheck.probe import nvml_health
from envcheck.probe.daemons import daemons
from envcheck.probe.driver_versions import kernel_module_version, userspace_version
from envcheck.probe.gpu_access import read_access
from envcheck.probe.gpu_usage import usage
from envcheck.probe.kernel_log import KMSG
from envcheck.probe.modules import nvidia_modules
from envcheck.probe.nvml import NVML_BUDGET_S, hang_text, read_nvml, warmup
from envcheck.probe.nvml_fields import Fields, Missing, or_absent
from envcheck.probe.pci import SYSFS_PCI, pci_drivers, pci_gpus, pci_nvswitches

_INIT_HINTS: dict[Any, str] = {
    18: " (the loaded kernel module is not the user-space driver's version: an upgrade without a reboot)",
    12: " (no NVIDIA driver here, or libnvidia-ml.so.1 is not mounted into the container)",
}


def _module_hint(modules: dict[str, str] | str) -> str:
    """NVML's 'Driver Not Loaded' beside what the kernel itself lists (/sys/module, /proc/modules), which decides."""
    if isinstance(modules, str):
        return f" (whether the nvidia module is loaded: {modules})"
    if "nvidia" not in modules:
        return " (the kernel lists no nvidia module)"
    return f" (yet the kernel lists the nvidia module, {modules['nvidia']}: NVML cannot reach it)"


# nvmlClocksEventReason* bits that may mean a fault (nvml.h): HW slowdown 0x8, HW thermal 0x40, HW power brake 0x80.
# nvml.h: HW slowdown "may be also reported during PState or clock change", so one sample is not enough: a GPU showing
# one is sampled again after SLOWDOWN_WINDOW_S, with the slowdowns' cumulative durations (fields 269-271) both times.
FAULT_SLOWDOWNS = 0x8 | 0x40 | 0x80
SLOWDOWN_WINDOW_S = 1.0


def _gpu(fields: Fields, i: int) -> dict[str, Any]:
    h = fields.handle(i)
    if isinstance(h, Missing):
        return {"index": i, "error": f"{h.call}: {h.error}"}
    gpu: dict[str, Any] = {
        "index": i,
        "name": fields.name(h),
        "uuid": fields.uuid(h),
        "pci": fields.pci_bus(h),
        "persistence": fields.persistence(h),
    }
    for aggregate, cname in ((False, "volatile"), (True, "aggregate")):
        for uncorrected, kname in ((False, "corrected"), (True, "uncorrected")):
            gpu[f"ecc_{cname}_{kname}"] = fields.ecc(h, aggregate, uncorrected)
    gpu["retired_pages_sbe"] = fields.retired_pages(h, double_bit=False)
    gpu["retired_pages_dbe"] = fields.retired_pages(h, double_bit=True)
    gpu["retired_pages_pending"] = fields.retired_pending(h)
    gpu["remapped_rows"] = fields.remapped_rows(h)
    for key, current, width in (
        ("pcie_gen", True, False),
        ("pcie_gen_max", False, False),
        ("pcie_width", True, True),
        ("pcie_width_max", False, True),
    ):
        gpu[key] = fields.pcie(h, current, width)
    gpu["clock_events"] = fields.clock_events(h)
    gpu["temperature_c"] = fields.temperature(h)
    gpu["mig"] = fields.mig(h)
    gpu["fabric"] = nvml_health.fabric(fields, h)
    gpu["nvlink"] = nvml_health.nvlinks(fields, h)
    gpu["virtualization"] = nvml_health.virtualization(fields, h)
    if gpu["virtualization"] == "vgpu":
        gpu["vgpu_license"] = nvml_health.vgpu_license(fields, h)
    gpu["recovery_action"] = nvml_health.field(fields, h, nvml_health.FI_RECOVERY_ACTION)
    gpu["inforom_valid"] = nvml_health.inforom(fields, h)
    gpu["repair_pending"] = nvml_health.repair_pending(fields, h)
    gpu = {k: or_absent(v) for k, v in gpu.items()}
    gpu.update(usage(fields, h))  # who holds it: a busy GPU is another job's, not a fault
    return gpu


# The NVLink counters whose growth a rule judges (checks.gpu_health.fabric_findings, after DCGM's NVLink4 watch):
# replays, recoveries, CRC errors. The data ECC counter is read, but judged by none: no reason to wait on it.
GROWTH_JUDGED = ("replay", "recovery", "crc_flit", "crc_data")


def _counting(gpu: dict[str, Any]) -> list[dict[str, Any]]:
    """The GPU's NVLinks whose judged error counters are not zero (those a second sample reads again)."""
    info = gpu.get("nvlink")
    entries = info.get("links") if isinstance(info, dict) else None
    return [e for e in entries or [] if any(isinstance(e.get(k), int) and e[k] for k in GROWTH_JUDGED)]


def _slowing(gpu: dict[str, Any]) -> bool:
    """Whether the GPU's first clock-event reading shows a fault slowdown (one a second sample must confirm)."""
    events = gpu.get("clock_events")
    return isinstance(events, int) and bool(events & FAULT_SLOWDOWNS) and "error" not in gpu


@dataclass(frozen=True)
class FirstReading:
    """When a GPU's first reading began and ended, and its slowdowns' cumulative durations then (a GPU showing a
    fault slowdown only)."""

    began: float
    ended: float
    ns: dict[str, int]


def _second_sample(fields: Fields, gpus: list[dict[str, Any]], first: dict[int, FirstReading]) -> None:
    """What one reading cannot tell, read again at least SLOWDOWN_WINDOW_S after each GPU's own first reading (a
    node whose GPUs take longer than the window to read would otherwise read its last GPUs again at once): a fault
    slowdown in the clock events (`slowdown`: the reasons again and the slowdowns' cumulative durations at the first
    reading and now), and NVLink error counters that are not zero (each link's `again`). `window_s` is that GPU's
    own, from the start of its first reading: a count that grew within it is a link failing now, one that did not
    is history. A GPU with no fault slowdown and no counted NVLink error is read once; one that has either waits."""
    slow = [g for g in gpus if _slowing(g) and g["index"] in first]
    counting = {g["index"]: _counting(g) for g in gpus if "error" not in g and g["index"] in first}
    counting = {i: links for i, links in counting.items() if links}
    again_for = {g["index"] for g in slow} | set(counting)
    if not again_for:
        return
    due = max(first[i].ended for i in again_for) + SLOWDOWN_WINDOW_S
    time.sleep(max(0.0, due - time.monotonic()))
    handles = {i: fields.handle(i) for i in again_for}

    def window(index: int) -> float:
        return round(time.monotonic() - first[index].began, 3)

    for g in slow:
        h = handles[g["index"]]
        again = fields.clock_events(h)
        g["slowdown"] = {
            "events_again": again if isinstance(again, int) else None,
            "ns_before": first[g["index"]].ns,
            "ns_after": nvml_health.slowdown_ns(fields, h),
            "window_s": window(g["index"]),
        }
    for index, links in counting.items():
        for entry in links:
            entry["again"] = nvml_health.link_counters(fields, handles[index], entry["link"])
            entry["window_s"] = window(index)


def _nvml_state(state: dict[str, Any], bus: list[str]) -> Callable[[Any, dict[str, Any]], None]:
    """The NVML body filling `state`: nvml_error, driver_version, and gpus one by one (`progress`: the call and
    the GPU being read, for the evidence of a hang); of the GPUs on the PCI bus NVML does not list, whether each
    was drained on purpose (`drained`)."""

    def fill(pynvml: Any, progress: dict[str, Any]) -> None:
        try:
            read(pynvml, progress)
        except Exception as exc:  # envcheck's own fault reading NVML's answers: never a GPU lost
            state["nvml_error"] = (
                f"envcheck could not read NVML's answer in {progress.get('call')} ({type(exc).__name__}: "
                f"{exc}): what followed was not read"
            )
            # NVML itself started: none of the causes of an NVML that cannot start applies
            state["reader_error"] = True

    def read(pynvml: Any, progress: dict[str, Any]) -> None:
        fields = Fields(pynvml)
        progress["call"] = "nvmlSystemGetDriverVersion"
        state["driver_version"] = or_absent(fields.driver_version())
        progress["call"] = "nvmlDeviceGetCount"
        count = fields.count()
        if isinstance(count, Missing):
            state["nvml_error"] = f"NVML cannot count the GPUs: {count.absent()['absent']}"
            return
        first: dict[int, FirstReading] = {}
        for i in range(count):
            progress.update(gpu=i, call=f"NVML reads of GPU {i}")
            began = time.monotonic()
            gpu = _gpu(fields, i)
            # the slowdowns' durations with the first reading, so the window between the two is the GPU's own
            ns = nvml_health.slowdown_ns(fields, fields.handle(i)) if _slowing(gpu) else {}
            state["gpus"].append(gpu)
            first[i] = FirstReading(began, time.monotonic(), ns)
        progress.update(gpu=None, call="nvmlDeviceGetCurrentClocksEventReasons (a second sample)")
        _second_sample(fields, state["gpus"], first)
        listed = {pci_key(g["pci"]) for g in state["gpus"] if isinstance(g.get("pci"), str)}
        progress.update(call="nvmlDeviceQueryDrainState")
        for address in bus:
            if pci_key(address) not in listed:
                state["drained"][address] = or_absent(nvml_health.drained(fields, address))
        progress.update(gpu=None, call=None)

    return fill


def _unavailable(state: dict[str, Any], modules: dict[str, str] | str) -> Callable[[BaseException], None]:
    def unavailable(exc: BaseException) -> None:
        code = getattr(exc, "value", None)
        state["nvml_code"] = code if isinstance(code, int) and not isinstance(code, bool) else None
        hint = _module_hint(modules) if code == 9 else _INIT_HINTS.get(code, "")
        state["nvml_error"] = (
            "NVML bindings not installed (pip install nvidia-ml-py)"
            if isinstance(exc, ImportError)
            else f"NVML could not start: {exc}{hint}"
        )

    return unavailable


def capture(kmsg: str = KMSG, nvml_budget_s: float = NVML_BUDGET_S, sysfs: str = SYSFS_PCI) -> dict[str, Any]:
    """Each GPU's NVML health fields, the kernel log's Xid and bus events, and the GPUs on the PCI bus;
    `nvml_error` says why NVML cannot tell, `nvml_hang` is the evidence of an NVML call that did not return.

    NVML runs through probe.nvml.read_nvml (a thread with a time budget): a GPU in a bad state can hang NVML
    calls, and then the kernel log and the GPUs read so far still come back, with the hang named."""
    state: dict[str, Any] = {
        "nvml_error": None,
        "nvml_code": None,
        "driver_version": None,
        "gpus": [],
        "drained": {},
    }
    bus = pci_gpus(sysfs)
    modules = nvidia_modules()
    out: dict[str, Any] = {
        "kernel_log": capture_xids(kmsg),
        "pci_gpus": bus,
        "pci_drivers": pci_drivers(sysfs),
        "nvswitches": pci_nvswitches(sysfs),
        "access": read_access(),
        "modules": modules,
        "daemons": daemons(),
    }
    warm = (
        warmup()
    )  # the node path's hold on NVML (probe.nvml.warm_up): how long the first initialisation took
    if warm is not None and warm.error is None:
        out["warmup"] = {"budget_s": warm.budget_s, "seconds": warm.seconds, "hang": warm.hang}
    got = read_nvml(
        _nvml_state(state, bus if isinstance(bus, list) else []), _unavailable(state, modules), nvml_budget_s
    )
    out.update(
        nvml_error=state["nvml_error"],
        nvml_code=state["nvml_code"],
        driver_version=state["driver_version"],
        gpus=list(state["gpus"]),
        drained=dict(state["drained"]),
        nvml_hung=None,
        nvml_hang=got.hang,
    )
    # after NVML's attempt, so the library it loaded (if any) names the user-space version
    out["versions"] = {"kernel_module": kernel_module_version(), "userspace": userspace_version()}
    if state.get("reader_error"):
        out["reader_error"] = True
    if got.hang is not None:  # the reader is left behind as a daemon thread: it ends with this process
        at = got.progress.get("gpu")
        out.update(
            nvml_error=hang_text(got.hang) + (f" (reading GPU {at})" if at is not None else ""),
            nvml_hung=at if at is not None else -1,
        )
    return out
