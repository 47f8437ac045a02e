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
NVML_FEATURE_DISABLED, NVML_FEATURE_ENABLED = 0, 1
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
    14: "Corrupted infoROM",
    15: "GPU is lost",
    16: "GPU requires restart",
    18: "Driver/library version mismatch",  # NVML_ERROR_LIB_RM_VERSION_MISMATCH, as nvidia-smi prints it
    23: "Insufficient Resources",
    25: "Argument version mismatch",
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
    listed = [
        g for g in state["gpus"] if not g.get("drained")
    ]  # nvml.h: a drained GPU is seen by no new process
    if (
        state.get("device_nodes", True) is False
    ):  # in-process use: every GPU of the state, whatever /dev holds
        return listed
    return [g for g in listed if os.access(f"/dev/nvidia{g['minor']}", os.R_OK | os.W_OK)]


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


def _in_order(h: dict[str, Any], name: str, value: Any) -> Any:
    """A value given as a list is answered one element per call, in order (the last one repeats): a counter that
    grows between two samples."""
    if not isinstance(value, list):
        return value
    key = f"{h.get('uuid') or h.get('bus')}:{name}"
    taken = _READINGS.get(key, 0)
    _READINGS[key] = taken + 1
    return value[min(taken, len(value) - 1)]


def nvmlDeviceGetCurrentClocksEventReasons(h: dict[str, Any]) -> int:
    return int(_in_order(h, "clock_events", _override(h, "clock_events", 1)))  # 0x1: GPU idle


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


HGX_LINKS = [1] * 18  # an HGX H100's GPU: 18 NVLinks, all active


def nvmlDeviceGetNvLinkState(h: dict[str, Any], link: int) -> int:
    links = _override(h, "nvlinks", HGX_LINKS)
    if link >= len(links):
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)  # nvml.h: "if device or link is invalid"
    value = links[link]
    if isinstance(value, dict):  # one link answering with an error
        raise NVMLError(int(value["nvml_error"]))
    return int(value)


_COUNTERS = ("replay", "recovery", "crc_flit", "crc_data", "ecc_data")  # nvmlNvLinkErrorCounter_t 0..4


def nvmlDeviceGetNvLinkErrorCounter(h: dict[str, Any], link: int, counter: int) -> int:
    links = _override(h, "nvlinks", HGX_LINKS)
    if link >= len(links):
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    counts = (_gpu(h).get("nvlink_counters") or {}).get(str(link), {})
    return int(_in_order(h, f"nvlink{link}.{counter}", counts.get(_COUNTERS[counter], 0)))


class _Value(types.SimpleNamespace):
    """c_nvmlValue_t's union: every member holds the value."""


def nvmlDeviceGetFieldValues(h: dict[str, Any], ids: list[Any]) -> list[Any]:
    """Each field from the GPU's "fields" (by id, or "id:scope"; a list answers in order, {"nvml_error": n} fails
    that entry); NVML_FI_DEV_NVLINK_LINK_COUNT (91) is the length of its "nvlinks", the recovery action (230) None;
    any other field answers NOT_SUPPORTED in its entry, as NVML does."""
    gpu = _gpu(h)
    given = gpu.get("fields") or {}
    out = []
    for fid in ids:
        field_id, scope = fid if isinstance(fid, tuple) else (fid, 0)
        key = f"{field_id}:{scope}" if isinstance(fid, tuple) else str(field_id)
        defaults = {
            "91": len(gpu.get("nvlinks") or HGX_LINKS) if gpu.get("nvlinks", 0) is not None else 0,
            "230": 0,
        }
        value = given.get(key, defaults.get(key))
        rc, number = 0, 0
        if value is None:
            rc = NVML_ERROR_NOT_SUPPORTED
        elif isinstance(value, dict):
            rc = int(value["nvml_error"])
        else:
            number = int(_in_order(h, f"field{key}", value))
        member = _Value(
            dVal=float(number),
            uiVal=number,
            ulVal=number,
            ullVal=number,
            sllVal=number,
            siVal=number,
            usVal=number,
        )
        out.append(
            types.SimpleNamespace(fieldId=field_id, scopeId=scope, nvmlReturn=rc, valueType=3, value=member)
        )
    return out


# NVML_GPU_FABRIC_STATE_COMPLETED with status success, the health an H100 on 580 reports (none: mask 0)
HGX_FABRIC = {"state": 3, "status": 0, "health_mask": 0, "health_summary": 0}


def _fill_fabric(h: dict[str, Any], info: Any, versioned: bool) -> None:
    fabric = _override(h, "fabric", HGX_FABRIC)
    struct = info._obj  # ctypes.byref(...) as the bindings pass it
    if versioned:
        version = struct.version >> 24
        if version > int(fabric.get("max_version", 3)):
            raise NVMLError(25)  # NVML_ERROR_ARGUMENT_VERSION_MISMATCH: a driver older than the structure
    struct.state = int(fabric["state"])
    struct.status = int(fabric.get("status", 0))
    struct.cliqueId = int(fabric.get("clique_id", 0))
    if versioned:
        struct.healthMask = int(fabric.get("health_mask", 0))
        if hasattr(struct, "healthSummary"):
            struct.healthSummary = int(fabric.get("health_summary", 0))


def nvmlDeviceGetGpuFabricInfoV(h: dict[str, Any], info: Any) -> int:
    _fill_fabric(h, info, versioned=True)
    return 0


def nvmlDeviceGetGpuFabricInfo(h: dict[str, Any], info: Any) -> int:
    _fill_fabric(h, info, versioned=False)
    return 0


def nvmlDeviceGetVirtualizationMode(h: dict[str, Any]) -> int:
    return int(_override(h, "virtualization_mode", 0))  # NVML_GPU_VIRTUALIZATION_MODE_NONE: bare metal


def nvmlDeviceGetGridLicensableFeatures_v4(h: dict[str, Any]) -> Any:
    """From "vgpu_license": {"supported": bool, "features": [{"code", "product", "enabled", "licensed"}]}."""
    lic = _override(h, "vgpu_license", {"supported": False, "features": []})
    features = [
        types.SimpleNamespace(
            featureCode=int(f.get("code", 4)),
            productName=_text(f.get("product", "NVIDIA Virtual Compute Server")),
            featureEnabled=int(bool(f.get("enabled"))),
            featureState=int(bool(f.get("licensed"))),
            licenseExpiry=types.SimpleNamespace(status=int(f.get("expiry_status", 2))),
        )
        for f in lic["features"]
    ]
    return types.SimpleNamespace(
        isGridLicenseSupported=int(bool(lic["supported"])),
        licensableFeaturesCount=len(features),
        gridLicensableFeatures=features,
    )


def nvmlDeviceValidateInforom(h: dict[str, Any]) -> None:
    if _override(h, "inforom", "valid") == "corrupt":
        raise NVMLError(14)  # NVML_ERROR_CORRUPTED_INFOROM


def nvmlDeviceGetRepairStatus(h: dict[str, Any]) -> tuple[int, int]:
    channel, tpc = _override(h, "repair_pending", [0, 0])
    return int(channel), int(tpc)


class nvmlPciInfo_t(types.SimpleNamespace):
    """The PCI-info structure nvmlDeviceQueryDrainState takes (busId as bytes; domain, bus, device numbers)."""

    busId = b""
    domain = bus = device = 0


def nvmlDeviceQueryDrainState(info: Any) -> int:
    """NVML_FEATURE_ENABLED (1) for a GPU the state lists under "drained" (PCI addresses as sysfs writes them). The
    address is the numeric domain, bus and device, the busId string only when they are all zero, as NVIDIA's own
    NVML mock reads it (NVIDIA/k8s-test-infra pkg/gpu/mocknvml/engine, pciLocation: "The numeric fields are what
    NVML documents, but a caller may fill only the busId string")."""
    numbers = (int(getattr(info, "domain", 0)), int(getattr(info, "bus", 0)), int(getattr(info, "device", 0)))
    bus = info.busId.decode() if isinstance(info.busId, bytes) else str(info.busId)
    wanted = bus.lower()[4:] if len(bus.split(":")[0]) == 8 else bus.lower()
    if any(numbers):
        wanted = f"{numbers[0]:04x}:{numbers[1]:02x}:{numbers[2]:02x}.0"
    return int(any(str(d).lower() == wanted for d in _state().get("drained", [])))


def _lacking() -> list[str]:
    try:
        return list(_state().get("bindings_lack", []))
    except (KeyError, OSError, ValueError):  # no state yet: the bindings are complete
        return []


for _name in _lacking():  # calls these bindings lack (older nvidia-ml-py): `getattr(pynvml, call)` finds none
    globals().pop(_name, None)
