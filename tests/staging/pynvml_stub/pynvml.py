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
"""

from __future__ import annotations

import ctypes
import json
import os
import threading
import time
import types
from typing import Any

NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_GPU_IS_LOST = 15
NVML_VOLATILE_ECC, NVML_AGGREGATE_ECC = 0, 1
NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 0, 1
NVML_TEMPERATURE_GPU = 0
_TEXT = {3: "Not Supported", 4: "Insufficient Permissions", 9: "Driver Not Loaded",
         12: "NVML Shared Library Not Found", 15: "GPU is lost", 999: "Unknown Error"}
_LOCK = threading.Lock()
_REFS = [0]


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
    return [g for g in _state()["gpus"] if os.access(f"/dev/nvidia{g['minor']}", os.R_OK | os.W_OK)]


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
    if not state.get("library", True):
        raise NVMLError(12)
    if not os.path.exists("/dev/nvidiactl"):
        raise NVMLError(9)
    hang = state.get("init_hang")
    if hang == "D":
        ctypes.CDLL("libcuda.so.1").stub_dstate(60)
    elif hang == "S":
        time.sleep(60)
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


def nvmlSystemGetDriverVersion() -> str:
    return str(_state().get("driver", "580.95.05"))


def nvmlDeviceGetCount() -> int:
    return len(_visible())


def nvmlDeviceGetHandleByIndex(index: int) -> dict[str, Any]:
    gpus = _visible()
    if not 0 <= index < len(gpus):
        raise NVMLError(2)
    return gpus[index]


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


def nvmlDeviceGetName(h: dict[str, Any]) -> str:
    return str(_override(h, "name", "NVIDIA H100 80GB HBM3"))


def nvmlDeviceGetUUID(h: dict[str, Any]) -> str:
    return str(_override(h, "uuid", None))


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


def nvmlDeviceGetTemperature(h: dict[str, Any], sensor: int) -> int:
    return int(_override(h, "temperature_c", 34))


def nvmlDeviceGetComputeRunningProcesses(h: dict[str, Any]) -> list[Any]:
    return [types.SimpleNamespace(pid=int(p["pid"]), usedGpuMemory=int(p["used_mib"]) * 2**20)
            for p in _override(h, "processes", [])]


def nvmlDeviceGetMemoryInfo(h: dict[str, Any]) -> Any:
    total, used = int(_override(h, "memory_total_mib", 81559)), int(_override(h, "memory_used_mib", 0))
    return types.SimpleNamespace(total=total * 2**20, used=used * 2**20, free=(total - used) * 2**20)


def nvmlDeviceGetComputeMode(h: dict[str, Any]) -> int:
    return int(_override(h, "compute_mode", 0))


def nvmlDeviceGetMigMode(h: dict[str, Any]) -> tuple[int, int]:
    mig = int(bool(_override(h, "mig", False)))
    return (mig, mig)


def nvmlDeviceGetMaxMigDeviceCount(h: dict[str, Any]) -> int:
    return 7 if _override(h, "mig", False) else 0


def nvmlDeviceGetMigDeviceHandleByIndex(h: dict[str, Any], index: int) -> dict[str, Any]:
    if not _override(h, "mig", False) or index > 0:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return {**h, "uuid": f"MIG-{str(h.get('uuid', 'GPU-0'))[4:]}"}


def nvmlDeviceGetNvLinkState(h: dict[str, Any], link: int) -> int:
    links = _override(h, "nvlinks", None)
    if link >= len(links):
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return int(links[link])
