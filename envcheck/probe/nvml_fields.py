"""Every NVML field envcheck reads, typed, in one place: the CUDA capture, the inventory, gpu.health, node.profile,
the GPU usage reads (node.cuda_driver, cuda.devices, dcgm.diag), cuda.available's compute modes and the benchmark's
GPU-state sampler (perf/gpu_state) read them here.

A `Fields` wraps one NVML session's bindings, so it is used inside `probe.nvml.read_nvml` (a thread within the
NVML budget), or by the benchmark's sampler, which runs only after NVML answered within that budget. Each field is read on its own and is its value or a `Missing`: NVML_ERROR_NOT_SUPPORTED (a feature the
GPU lacks: ECC on a consumer GPU, MIG on a GPU without it) is absence (`not_supported`), never a fault; any other
error keeps the call and its text; a call the bindings lack is said so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from envcheck.core.versions import cuda_version_text
from envcheck.probe.system import absent

T = TypeVar("T")
NOT_SUPPORTED = "not supported"
# NVML's codes that mean the driver cannot answer, not that the GPU is in a bad state (nvml.h): NOT_SUPPORTED 3,
# FUNCTION_NOT_FOUND 13 (a driver older than the call), ARGUMENT_VERSION_MISMATCH 25 (a structure newer than the
# driver), DEPRECATED 26 (a field id the driver no longer answers).
CANNOT_ANSWER = frozenset({3, 13, 25, 26})
COMPUTE_MODES = {0: "DEFAULT", 1: "EXCLUSIVE_THREAD", 2: "PROHIBITED", 3: "EXCLUSIVE_PROCESS"}
# nvmlClocksEventReason* bits (nvml.h; the deprecated nvmlClocksThrottleReason* bits have the same values).
GPU_IDLE, APP_CLOCKS, SW_POWER_CAP, HW_SLOWDOWN, SYNC_BOOST = 0x1, 0x2, 0x4, 0x8, 0x10
SW_THERMAL, HW_THERMAL, HW_POWER_BRAKE, DISPLAY_CLOCKS = 0x20, 0x40, 0x80, 0x100
CLOCK_EVENTS = {
    GPU_IDLE: "GPU idle",
    APP_CLOCKS: "application clocks setting",
    SW_POWER_CAP: "SW power cap",
    HW_SLOWDOWN: "HW slowdown",
    SYNC_BOOST: "sync boost",
    SW_THERMAL: "SW thermal slowdown",
    HW_THERMAL: "HW thermal slowdown",
    HW_POWER_BRAKE: "HW power brake slowdown",
    DISPLAY_CLOCKS: "display clock setting",
}


@dataclass(frozen=True)
class Missing:
    """A field NVML did not give: `call` failed with `error`; `not_supported` when the GPU lacks the feature."""

    call: str
    error: str
    not_supported: bool = False
    code: int | None = None  # NVML's return code, when the bindings gave one

    NO_CALL = "not in these NVML bindings"

    def absent(self) -> dict[str, str]:
        """The bundle's marker: absent('not supported') or absent('<call>: <error>')."""
        return absent(NOT_SUPPORTED if self.not_supported else f"{self.call}: {self.error}")


def text(value: Any) -> str:
    """NVML strings arrive as bytes from older bindings and as str from newer ones."""
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def value(got: T | Missing) -> T | None:
    """The value, or None for a Missing (for readers that only need to know whether it is there)."""
    return None if isinstance(got, Missing) else got


def or_absent(got: Any) -> Any:
    """The value, or the bundle's absent marker for a Missing."""
    return got.absent() if isinstance(got, Missing) else got


def _process_name(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as f:
            return f.read().strip()[:64] or None
    except OSError:  # another PID namespace, or gone
        return None


class Fields:
    """Typed reads of one NVML session (`pynvml` after nvmlInit, inside read_nvml's budget)."""

    def __init__(self, pynvml: Any) -> None:
        self.pynvml = pynvml

    @staticmethod
    def unsupported(code: object) -> bool:
        """Whether NVML's return code says the driver or GPU cannot answer (absence, never a verdict)."""
        return code in CANNOT_ANSWER

    def const(self, name: str, default: int) -> int:
        """An NVML constant from the bindings (older bindings lack some)."""
        return int(getattr(self.pynvml, name, default))

    def read(self, call: str, *args: Any, convert: Callable[[Any], T] = lambda v: v) -> T | Missing:
        """convert(pynvml.call(*args)), or why not."""
        fn = getattr(self.pynvml, call, None)
        if fn is None:
            return Missing(call, Missing.NO_CALL)
        try:
            return convert(fn(*args))
        except Exception as exc:  # pynvml.NVMLError and its subclasses; odd values from old bindings
            code = getattr(exc, "value", None)
            return Missing(
                call,
                str(exc) or type(exc).__name__,
                self.unsupported(code),
                code if isinstance(code, int) and not isinstance(code, bool) else None,
            )

    # --- the system ---
    def count(self) -> int | Missing:
        """How many GPUs NVML lists (those this process may use)."""
        return self.read("nvmlDeviceGetCount", convert=int)

    def driver_version(self) -> str | Missing:
        """The driver's version ('580.95.05')."""
        return self.read("nvmlSystemGetDriverVersion", convert=text)

    def driver_cuda(self) -> str | Missing:
        """The newest CUDA the driver supports ('13.0')."""
        return self.read("nvmlSystemGetCudaDriverVersion", convert=lambda v: cuda_version_text(int(v)))

    # --- a GPU (or a MIG device's handle) ---
    def handle(self, index: int) -> Any:
        """The handle of GPU `index` (a Missing when NVML cannot open it, e.g. 'GPU is lost')."""
        return self.read("nvmlDeviceGetHandleByIndex", index)

    def name(self, h: Any) -> str | Missing:
        """The product name."""
        return self.read("nvmlDeviceGetName", h, convert=text)

    def uuid(self, h: Any) -> str | Missing:
        """'GPU-…' or 'MIG-…'."""
        return self.read("nvmlDeviceGetUUID", h, convert=text)

    def pci_bus(self, h: Any) -> str | Missing:
        """NVML's bus id ('00000000:18:00.0')."""
        return self.read("nvmlDeviceGetPciInfo", h, convert=lambda p: text(p.busId))

    def persistence(self, h: Any) -> bool | Missing:
        """Whether persistence mode is on."""
        return self.read("nvmlDeviceGetPersistenceMode", h, convert=lambda v: int(v) == 1)

    def ecc(self, h: Any, aggregate: bool, uncorrected: bool) -> int | Missing:
        """ECC error count: volatile (since the last driver load) or aggregate (lifetime), corrected or not."""
        kind = (
            self.const("NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)
            if uncorrected
            else self.const("NVML_MEMORY_ERROR_TYPE_CORRECTED", 0)
        )
        counter = self.const("NVML_AGGREGATE_ECC", 1) if aggregate else self.const("NVML_VOLATILE_ECC", 0)
        return self.read("nvmlDeviceGetTotalEccErrors", h, kind, counter, convert=int)

    def retired_pages(self, h: Any, double_bit: bool) -> int | Missing:
        """How many pages were retired for single-bit (SBE) or double-bit (DBE) errors (nvmlPageRetirementCause_t)."""
        return self.read("nvmlDeviceGetRetiredPages", h, int(double_bit), convert=len)

    def retired_pending(self, h: Any) -> bool | Missing:
        """Whether a page retirement waits for the next driver reload."""
        return self.read("nvmlDeviceGetRetiredPagesPendingStatus", h, convert=lambda v: int(v) == 1)

    def remapped_rows(self, h: Any) -> dict[str, Any] | Missing:
        """Row remapping: corrected and uncorrected counts, pending, failure."""
        return self.read(
            "nvmlDeviceGetRemappedRows",
            h,
            convert=lambda t: {
                "corrected": int(t[0]),
                "uncorrected": int(t[1]),
                "pending": bool(t[2]),
                "failure": bool(t[3]),
            },
        )

    def pcie(self, h: Any, current: bool, width: bool) -> int | Missing:
        """The PCIe link's generation or width, current or maximum."""
        return self.read(
            f"nvmlDeviceGet{'Curr' if current else 'Max'}PcieLink{'Width' if width else 'Generation'}",
            h,
            convert=int,
        )

    def clock_events(self, h: Any) -> int | Missing:
        """nvmlClocksEventReason* bits; bindings or drivers older than the rename answer the throttle-reasons call."""
        events = self.read("nvmlDeviceGetCurrentClocksEventReasons", h, convert=int)
        # the older call where the newer one is not in the bindings or the driver (13: FUNCTION_NOT_FOUND)
        if isinstance(events, Missing) and (not events.not_supported or events.code == 13):
            older = self.read("nvmlDeviceGetCurrentClocksThrottleReasons", h, convert=int)
            return older if not isinstance(older, Missing) or older.not_supported else events
        return events

    def handle_by_uuid(self, uuid: str) -> Any:
        """The handle of the GPU with this UUID ('GPU-…'; a Missing when NVML does not know it)."""
        return self.read("nvmlDeviceGetHandleByUUID", uuid)

    def clock_mhz(self, h: Any, memory: bool) -> int | Missing:
        """The current SM (or memory) clock in MHz."""
        kind = self.const("NVML_CLOCK_MEM", 2) if memory else self.const("NVML_CLOCK_SM", 1)
        return self.read("nvmlDeviceGetClockInfo", h, kind, convert=int)

    def power_w(self, h: Any) -> float | Missing:
        """The board's power draw in watts (NVML answers milliwatts)."""
        return self.read("nvmlDeviceGetPowerUsage", h, convert=lambda mw: int(mw) / 1000.0)

    def utilization(self, h: Any) -> dict[str, float] | Missing:
        """The share of NVML's last sample window in which a kernel ran (`gpu_pct`) or memory was read or written."""
        return self.read(
            "nvmlDeviceGetUtilizationRates",
            h,
            convert=lambda u: {"gpu_pct": float(u.gpu), "memory_pct": float(u.memory)},
        )

    def context_holders(self, h: Any) -> dict[int, int | None]:
        """PID -> bytes of GPU memory (None: not reported) of every compute or graphics context on the GPU; a
        list NVML cannot give adds nothing."""
        holders: dict[int, int | None] = {}
        for call in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
            procs = self.read(call, h, convert=list)
            for p in [] if isinstance(procs, Missing) else procs:
                holders.setdefault(int(p.pid), getattr(p, "usedGpuMemory", None))
        return holders

    def temperature(self, h: Any) -> int | Missing:
        """The GPU's temperature in °C."""
        return self.read("nvmlDeviceGetTemperature", h, self.const("NVML_TEMPERATURE_GPU", 0), convert=int)

    def memory(self, h: Any) -> dict[str, int] | Missing:
        """Memory total and used, in MiB (used left out where the bindings give only the total)."""

        def mib(m: Any) -> dict[str, int]:
            used = getattr(m, "used", None)
            return {
                "total_mib": int(m.total // 2**20),
                **({} if used is None else {"used_mib": int(used // 2**20)}),
            }

        return self.read("nvmlDeviceGetMemoryInfo", h, convert=mib)

    def compute_mode(self, h: Any) -> str | Missing:
        """DEFAULT, EXCLUSIVE_PROCESS, EXCLUSIVE_THREAD or PROHIBITED."""
        return self.read(
            "nvmlDeviceGetComputeMode", h, convert=lambda v: COMPUTE_MODES.get(int(v), str(int(v)))
        )

    def mig(self, h: Any) -> bool | Missing:
        """Whether MIG mode is on (not_supported: a GPU without MIG)."""
        return self.read("nvmlDeviceGetMigMode", h, convert=lambda v: bool(v[0]))

    def mig_handles(self, h: Any) -> list[tuple[int, Any]] | Missing:
        """(slot, handle) of each MIG device of a GPU in MIG mode. An empty slot (NVML_ERROR_NOT_FOUND, nvml.h:
        "no valid MIG device was found at index") is skipped; any other error means the list is not known (a GPU
        that is lost answers every slot with an error: that is not "no instance")."""
        count = self.read("nvmlDeviceGetMaxMigDeviceCount", h, convert=int)
        if isinstance(count, Missing):
            return count
        found = [(k, self.read("nvmlDeviceGetMigDeviceHandleByIndex", h, k)) for k in range(count)]
        failed = [
            mh
            for _, mh in found
            if isinstance(mh, Missing) and mh.code != self.const("NVML_ERROR_NOT_FOUND", 6)
        ]
        if failed:
            return failed[0]
        return [(k, mh) for k, mh in found if not isinstance(mh, Missing)]

    def compute_capability(self, h: Any) -> str | Missing:
        """'9.0'."""
        return self.read("nvmlDeviceGetCudaComputeCapability", h, convert=lambda v: f"{v[0]}.{v[1]}")

    def processes(self, h: Any) -> list[dict[str, Any]] | Missing:
        """The compute processes on a GPU: pid, MiB used, name (from /proc, when in this PID namespace)."""
        return self.read(
            "nvmlDeviceGetComputeRunningProcesses",
            h,
            convert=lambda procs: [
                {
                    "pid": int(p.pid),
                    "used_mib": int((getattr(p, "usedGpuMemory", 0) or 0) // 2**20),
                    "name": _process_name(int(p.pid)),
                }
                for p in procs
            ],
        )
