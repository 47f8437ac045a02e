"""gpu.health's capture: each GPU's NVML health fields (through probe.nvml's budgeted reader), the kernel log's Xid
and bus events, and the GPUs on the PCI bus. Every field is read on its own: NOT_SUPPORTED (consumer GPUs have no ECC
or row remapping) is recorded as `absent('not supported')`; any other error as its text."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from envcheck.checks.gpu_health.xid import capture_xids
from envcheck.probe.gpu_access import read_access
from envcheck.probe.kernel_log import KMSG
from envcheck.probe.nvml import NVML_BUDGET_S, hang_text, read_nvml, usage, warmup
from envcheck.probe.nvml import text as _text
from envcheck.probe.pci import SYSFS_PCI, pci_gpus
from envcheck.probe.system import absent, is_absent

NOT_SUPPORTED = "not supported"
_INIT_HINTS: dict[Any, str] = {12: " (no NVIDIA driver here, or libnvidia-ml.so.1 is not mounted into the container)",
               9: " (the nvidia kernel module is not loaded)"}


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
    gpu.update(usage(pynvml, h))  # who holds it: a busy GPU is another job's, not a fault
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
    out: dict[str, Any] = {"kernel_log": capture_xids(kmsg), "pci_gpus": pci_gpus(sysfs), "access": read_access()}
    warm = warmup()  # the node path's hold on NVML (probe.nvml.warm_up): how long the first initialisation took
    if warm is not None and warm.error is None:
        out["warmup"] = {"budget_s": warm.budget_s, "seconds": warm.seconds, "hang": warm.hang}
    got = read_nvml(_nvml_state(state), _unavailable(state), nvml_budget_s)
    out.update(nvml_error=state["nvml_error"], driver_version=state["driver_version"], gpus=list(state["gpus"]),
               nvml_hung=None, nvml_hang=got.hang)
    if got.hang is not None:  # the reader is left behind as a daemon thread: it ends with this process
        at = got.progress.get("gpu")
        out.update(nvml_error=hang_text(got.hang) + (f" (reading GPU {at})" if at is not None else ""),
                   nvml_hung=at if at is not None else -1)
    return out
