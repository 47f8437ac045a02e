"""Stand-in for nvidia-ml-py's `pynvml` on a staged GPU node (tests only: NVML cannot exist without a driver).

Put this folder on PYTHONPATH and STUB_NVML_STATE at a JSON state (tests/staging/gpu_node.py writes it). It behaves as
NVML does in each deployment shape:
- it lists only the GPUs whose /dev/nvidia<minor> this process may use (access(2)), as NVML does in a container
  given some GPUs or a job under a device cgroup; indices are 0..n-1 over those, as NVML numbers them;
- nvmlInit fails with NVML's own codes when the library or the driver is gone (12 "NVML Shared Library Not Found",
  9 "Driver Not Loaded"), takes `cold_s_per_gpu` per GPU when persistence mode is off and no other client holds the
  GPUs (a file per holder in `warm_dir`, which the libcuda stand-in reads too), or blocks its caller ("init_hang":
  "D" through the libcuda stand-in's vfork, "S" by sleeping);
- a GPU with "lost": true answers every call with 15 "GPU is lost"; a call the state does not mention answers
  3 "Not Supported", as NVML does for a feature a GPU lacks;
- processes, memory and compute mode come from the state (NVML_COMPUTEMODE_*: 0 DEFAULT, 3 EXCLUSIVE_PROCESS).
Error texts are nvidia-ml-py's (nvmlErrorString).

It is the one NVML fake of the test suite: tests that need NVML without a staged node load it in-process
(tests/staging/nvml.py: `"device_nodes": false` lists every GPU of the state whatever /dev holds) or put this folder
on a child's PYTHONPATH. Any call's answer can be an error (`{"nvml_error": code}` in place of the value, also for
"init", "driver", "driver_cuda" and a GPU's "handle"); "bindings_lack" removes calls, as older nvidia-ml-py lacks
them; "bytes": true answers strings as bytes, as older bindings did; a GPU's "hang_s" blocks its handle's lookup.
"""

from __future__ import annotations

import ctypes
import json
import os
import threading
import time
import types
from typing import Any

NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_UNKNOWN = 999
NVML_CLOCK_GRAPHICS, NVML_CLOCK_SM, NVML_CLOCK_MEM = 0, 1, 2
NVML_VOLATILE_ECC, NVML_AGGREGATE_ECC = 0, 1
NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 0, 1
NVML_TEMPERATURE_GPU = 0
_TEXT = {
    2: "Invalid Argument",
    3: "Not Supported",
    4: "Insufficient Permissions",
    6: "Not Found",
    9: "Driver Not Loaded",
    12: "NVML Shared Library Not Found",
    13: "Function Not Found",
    15: "GPU is lost",
    18: "Driver/library version mismatch",  # NVML_ERROR_LIB_RM_VERSION_MISMATCH, as nvidia-smi prints it
    999: "Unknown Error",
}
_LOCK = threading.Lock()
_REFS = [0]
_READINGS: dict[
    str, int
] = {}  # per GPU: how many utilisation readings were taken (they are answered in order)


class NVMLError(Exception):
    """nvidia-ml-py's exception: `.value` is NVML's return code, str() its text."""

    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return _TEXT.get(self.value, f"NVML Error with code {self.value}")


def _state() -> dict[str, Any]:
    with open(os.environ["STUB_NVML_STATE"], encoding="utf-8") as f:
        state: dict[str, Any] = json.load(f)
    return state


def _visible() -> list[dict[str, Any]]:
    state = _state()
    if (
        state.get("device_nodes", True) is False
    ):  # in-process use: every GPU of the state, whatever /dev holds
        return list(state["gpus"])
    return [g for g in state["gpus"] if os.access(f"/dev/nvidia{g['minor']}", os.R_OK | os.W_OK)]


def _raise_if_error(value: Any) -> Any:
    if isinstance(value, dict) and "nvml_error" in value:
        raise NVMLError(int(value["nvml_error"]))
    return value


def _text(value: str) -> Any:
    return value.encode() if _state().get("bytes") else value


def _holder() -> str:
    return os.path.join(_state().get("warm_dir", "/run/stub-gpu-warm"), str(os.getpid()))


def _warm(state: dict[str, Any]) -> bool:
    if state.get("persistence_daemon"):
        return True
    folder = state.get("warm_dir", "/run/stub-gpu-warm")
    try:
        return any(os.path.exists(f"/proc/{pid}") for pid in os.listdir(folder))
    except OSError:
        return False


def nvmlInit() -> None:
    state = _state()
    _raise_if_error(state.get("init"))
    if not state.get("library", True):
        raise NVMLError(12)
    if state.get("device_nodes", True) is not False and not os.path.exists("/dev/nvidiactl"):
        raise NVMLError(9)
    hang = state.get("init_hang")
    if hang == "D":
        ctypes.CDLL("libcuda.so.1").stub_dstate(60)
    elif hang == "S":
        time.sleep(float(state.get("init_hang_s", 60)))
    with _LOCK:
        if _REFS[0] == 0:
            if not _warm(state):
                time.sleep(float(state.get("cold_s_per_gpu", 0)) * len(_visible()))
            try:  # the record of who holds the GPUs (a non-root container may have no writable /run: no record)
                os.makedirs(os.path.dirname(_holder()), exist_ok=True)
                with open(_holder(), "w", encoding="utf-8"):
                    pass
            except OSError:
                pass
        _REFS[0] += 1


def nvmlInitWithFlags(flags: int) -> None:
    nvmlInit()


def nvmlShutdown() -> None:
    with _LOCK:
        _REFS[0] = max(0, _REFS[0] - 1)
        if _REFS[0] == 0:
            try:
                os.unlink(_holder())
            except OSError:
                pass


def nvmlSystemGetDriverVersion() -> Any:
    return _text(str(_raise_if_error(_state().get("driver", "580.95.05"))))


def nvmlSystemGetCudaDriverVersion() -> int:
    return int(_raise_if_error(_state().get("driver_cuda", 13000)))


def nvmlDeviceGetCount() -> int:
    return len(_visible())


def nvmlDeviceGetHandleByIndex(index: int) -> dict[str, Any]:
    gpus = _visible()
    if not 0 <= index < len(gpus):
        raise NVMLError(2)
    time.sleep(float(gpus[index].get("hang_s", 0)))  # a GPU in a bad state: NVML blocks on it
    _raise_if_error(gpus[index].get("handle"))
    return gpus[index]


def nvmlDeviceGetHandleByUUID(uuid: Any) -> dict[str, Any]:
    wanted = uuid.decode() if isinstance(uuid, bytes) else str(uuid)
    for gpu in _visible():
        if gpu.get("uuid") == wanted:
            return gpu
    raise NVMLError(NVML_ERROR_NOT_FOUND)


def _gpu(handle: dict[str, Any]) -> dict[str, Any]:
    if handle.get("lost"):
        raise NVMLError(NVML_ERROR_GPU_IS_LOST)
    return handle


def _override(handle: dict[str, Any], name: str, default: Any) -> Any:
    value = _gpu(handle).get(name, default)
    if isinstance(value, dict) and "nvml_error" in value:
        raise NVMLError(int(value["nvml_error"]))
    if value is None:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return value


def nvmlDeviceGetName(h: dict[str, Any]) -> Any:
    return _text(str(_override(h, "name", "NVIDIA H100 80GB HBM3")))


def nvmlDeviceGetUUID(h: dict[str, Any]) -> Any:
    return _text(str(_override(h, "uuid", None)))


def nvmlDeviceGetPciInfo(h: dict[str, Any]) -> Any:
    bus = str(_gpu(h)["bus"])  # '0000:18:00.0' as sysfs writes it; NVML's busId is '00000000:18:00.0'
    return types.SimpleNamespace(busId=("0000" + bus.upper()).encode())


def nvmlDeviceGetPersistenceMode(h: dict[str, Any]) -> int:
    return int(_override(h, "persistence", 1))


def nvmlDeviceGetTotalEccErrors(h: dict[str, Any], kind: int, counter: int) -> int:
    return int(_override(h, f"ecc_{counter}_{kind}", 0))


def nvmlDeviceGetRetiredPages(h: dict[str, Any], cause: int) -> list[int]:
    return list(_override(h, f"retired_{cause}", []))


def nvmlDeviceGetRetiredPagesPendingStatus(h: dict[str, Any]) -> int:
    return int(_override(h, "retired_pending", 0))


def nvmlDeviceGetRemappedRows(h: dict[str, Any]) -> tuple[int, int, int, int]:
    rows = _override(h, "remapped_rows", [0, 0, 0, 0])
    return (int(rows[0]), int(rows[1]), int(rows[2]), int(rows[3]))


def nvmlDeviceGetCurrPcieLinkGeneration(h: dict[str, Any]) -> int:
    return int(_override(h, "pcie_gen", 5))


def nvmlDeviceGetMaxPcieLinkGeneration(h: dict[str, Any]) -> int:
    return int(_override(h, "pcie_gen_max", 5))


def nvmlDeviceGetCurrPcieLinkWidth(h: dict[str, Any]) -> int:
    return int(_override(h, "pcie_width", 16))


def nvmlDeviceGetMaxPcieLinkWidth(h: dict[str, Any]) -> int:
    return int(_override(h, "pcie_width_max", 16))


def nvmlDeviceGetCurrentClocksEventReasons(h: dict[str, Any]) -> int:
    return int(_override(h, "clock_events", 1))  # 0x1: GPU idle


def nvmlDeviceGetCurrentClocksThrottleReasons(h: dict[str, Any]) -> int:
    return int(_override(h, "throttle_reasons", 1))  # the older name of the call above


def nvmlDeviceGetTemperature(h: dict[str, Any], sensor: int) -> int:
    return int(_override(h, "temperature_c", 34))


def nvmlDeviceGetCudaComputeCapability(h: dict[str, Any]) -> tuple[int, int]:
    major, minor = _override(h, "compute_capability", [9, 0])
    return int(major), int(minor)


def nvmlDeviceGetComputeRunningProcesses(h: dict[str, Any]) -> list[Any]:
    return [
        types.SimpleNamespace(pid=int(p["pid"]), usedGpuMemory=int(p["used_mib"]) * 2**20)
        for p in _override(h, "processes", [])
    ]


def nvmlDeviceGetGraphicsRunningProcesses(h: dict[str, Any]) -> list[Any]:
    return [
        types.SimpleNamespace(pid=int(p["pid"]), usedGpuMemory=int(p["used_mib"]) * 2**20)
        for p in _override(h, "graphics_processes", [])
    ]


def nvmlDeviceGetUtilizationRates(h: dict[str, Any]) -> Any:
    readings = _override(h, "utilization", [[0, 0]])  # [gpu %, memory %] per reading, answered in order
    key = str(h.get("uuid") or h.get("bus"))
    taken = _READINGS.get(key, 0)
    _READINGS[key] = taken + 1
    gpu, memory = readings[min(taken, len(readings) - 1)]
    return types.SimpleNamespace(gpu=gpu, memory=memory)


def nvmlDeviceGetClockInfo(h: dict[str, Any], kind: int) -> int:
    return int(
        _override(h, "mem_clock_mhz", 2619) if kind == NVML_CLOCK_MEM else _override(h, "sm_clock_mhz", 1980)
    )


def nvmlDeviceGetPowerUsage(h: dict[str, Any]) -> int:
    return int(float(_override(h, "power_w", 70.0)) * 1000)  # milliwatts


def nvmlDeviceGetMemoryInfo(h: dict[str, Any]) -> Any:
    total, used = int(_override(h, "memory_total_mib", 81559)), int(_override(h, "memory_used_mib", 0))
    return types.SimpleNamespace(total=total * 2**20, used=used * 2**20, free=(total - used) * 2**20)


def nvmlDeviceGetComputeMode(h: dict[str, Any]) -> int:
    return int(_override(h, "compute_mode", 0))


def nvmlDeviceGetMigMode(h: dict[str, Any]) -> tuple[int, int]:
    mig = int(bool(_override(h, "mig", False)))
    return (mig, mig)


def nvmlDeviceGetMaxMigDeviceCount(h: dict[str, Any]) -> int:
    if not _override(h, "mig", False):
        return 0
    return len(h["mig_devices"]) if isinstance(h.get("mig_devices"), list) else 7


def nvmlDeviceGetMigDeviceHandleByIndex(h: dict[str, Any], index: int) -> dict[str, Any]:
    if not _override(h, "mig", False):
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    slots = h.get("mig_devices")
    if isinstance(
        slots, list
    ):  # each slot: a MIG device's fields (uuid, memory_total_mib ...), or null (empty)
        if index >= len(slots) or slots[index] is None:
            raise NVMLError(NVML_ERROR_NOT_FOUND)
        return {**h, "mig": False, "mig_devices": None, **slots[index]}
    if index > 0:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return {**h, "uuid": f"MIG-{str(h.get('uuid', 'GPU-0'))[4:]}"}


def nvmlDeviceGetNvLinkState(h: dict[str, Any], link: int) -> int:
    links = _override(h, "nvlinks", None)
    if link >= len(links):
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return int(links[link])


def _lacking() -> list[str]:
    try:
        return list(_state().get("bindings_lack", []))
    except (KeyError, OSError, ValueError):  # no state yet: the bindings are complete
        return []


for _name in _lacking():  # calls these bindings lack (older nvidia-ml-py): `getattr(pynvml, call)` finds none
    globals().pop(_name, None)
