"""gpu.health's capture: each GPU's NVML health fields (through probe.nvml's budgeted reader), the kernel log's Xid
and bus events, and the GPUs on the PCI bus. Every field is read on its own: NOT_SUPPORTED (consumer GPUs have no ECC
or row remapping) is recorded as `absent('not supported')`; any other error as its text."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from envcheck.checks.gpu_health.kernel_events import capture_xids
from envcheck.probe.driver_versions import kernel_module_version, userspace_version
from envcheck.probe.gpu_access import read_access
from envcheck.probe.gpu_usage import usage
from envcheck.probe.kernel_log import KMSG
from envcheck.probe.nvml import NVML_BUDGET_S, hang_text, read_nvml, warmup
from envcheck.probe.nvml_fields import Fields, Missing, or_absent
from envcheck.probe.pci import SYSFS_PCI, pci_drivers, pci_gpus

_INIT_HINTS: dict[Any, str] = {
    18: " (the loaded kernel module is not the user-space driver's version: an upgrade without a reboot)",
    12: " (no NVIDIA driver here, or libnvidia-ml.so.1 is not mounted into the container)",
    9: " (the nvidia kernel module is not loaded)",
}


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
    gpu = {k: or_absent(v) for k, v in gpu.items()}
    gpu.update(usage(fields, h))  # who holds it: a busy GPU is another job's, not a fault
    return gpu


def _nvml_state(state: dict[str, Any]) -> Callable[[Any, dict[str, Any]], None]:
    """The NVML body filling `state`: nvml_error, driver_version, and gpus one by one (`progress`: the call and
    the GPU being read, for the evidence of a hang)."""

    def fill(pynvml: Any, progress: dict[str, Any]) -> None:
        fields = Fields(pynvml)
        progress["call"] = "nvmlSystemGetDriverVersion"
        state["driver_version"] = or_absent(fields.driver_version())
        progress["call"] = "nvmlDeviceGetCount"
        count = fields.count()
        if isinstance(count, Missing):
            state["nvml_error"] = f"NVML cannot count the GPUs: {count.absent()['absent']}"
            return
        for i in range(count):
            progress.update(gpu=i, call=f"NVML reads of GPU {i}")
            state["gpus"].append(_gpu(fields, i))
        progress.update(gpu=None, call=None)

    return fill


def _unavailable(state: dict[str, Any]) -> Callable[[BaseException], None]:
    def unavailable(exc: BaseException) -> None:
        code = getattr(exc, "value", None)
        state["nvml_code"] = code if isinstance(code, int) and not isinstance(code, bool) else None
        state["nvml_error"] = (
            "NVML bindings not installed (pip install nvidia-ml-py)"
            if isinstance(exc, ImportError)
            else f"NVML could not start: {exc}{_INIT_HINTS.get(getattr(exc, 'value', None), '')}"
        )

    return unavailable


def capture(kmsg: str = KMSG, nvml_budget_s: float = NVML_BUDGET_S, sysfs: str = SYSFS_PCI) -> dict[str, Any]:
    """Each GPU's NVML health fields, the kernel log's Xid and bus events, and the GPUs on the PCI bus;
    `nvml_error` says why NVML cannot tell, `nvml_hang` is the evidence of an NVML call that did not return.

    NVML runs through probe.nvml.read_nvml (a thread with a time budget): a GPU in a bad state can hang NVML
    calls, and then the kernel log and the GPUs read so far still come back, with the hang named."""
    state: dict[str, Any] = {"nvml_error": None, "nvml_code": None, "driver_version": None, "gpus": []}
    out: dict[str, Any] = {
        "kernel_log": capture_xids(kmsg),
        "pci_gpus": pci_gpus(sysfs),
        "pci_drivers": pci_drivers(sysfs),
        "access": read_access(),
    }
    warm = (
        warmup()
    )  # the node path's hold on NVML (probe.nvml.warm_up): how long the first initialisation took
    if warm is not None and warm.error is None:
        out["warmup"] = {"budget_s": warm.budget_s, "seconds": warm.seconds, "hang": warm.hang}
    got = read_nvml(_nvml_state(state), _unavailable(state), nvml_budget_s)
    out.update(
        nvml_error=state["nvml_error"],
        nvml_code=state["nvml_code"],
        driver_version=state["driver_version"],
        gpus=list(state["gpus"]),
        nvml_hung=None,
        nvml_hang=got.hang,
    )
    # after NVML's attempt, so the library it loaded (if any) names the user-space version
    out["versions"] = {"kernel_module": kernel_module_version(), "userspace": userspace_version()}
    if got.hang is not None:  # the reader is left behind as a daemon thread: it ends with this process
        at = got.progress.get("gpu")
        out.update(
            nvml_error=hang_text(got.hang) + (f" (reading GPU {at})" if at is not None else ""),
            nvml_hung=at if at is not None else -1,
        )
    return out
