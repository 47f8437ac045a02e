"""NVML's health surface beyond a GPU's basic fields, read through one session's `Fields` (inside probe.nvml's
budgeted reader): NVLink fabric registration and health, each NVLink's state and error counters against the GPU's own
link count, virtualization mode and vGPU licence, the driver's recovery action, InfoROM, pending repairs, the clock
slowdowns' cumulative durations, and whether a GPU NVML does not list was drained on purpose.

Sources: nvml.h (NVML 13.3.29, NVIDIA/go-nvml gen/nvml/nvml.h at 8b8585b) and pynvml.py of nvidia-ml-py 13.615.71.
The fabric structures are declared here from nvml.h rather than taken from the installed bindings: nvidia-ml-py up to
13.590 declares the v1 structure 92 bytes long (nvml.h: 28), 12.550-12.560 the versioned one 100 bytes (36), so their
`state` reads a zeroed offset and every GPU would show "no fabric". A query the driver or GPU does not support is
absence (probe.nvml_fields.Missing, `not_supported`), never a verdict.
"""

from __future__ import annotations

import ctypes
from typing import Any

from envcheck.probe.nvml_fields import Fields, Missing, text

# nvml.h: field ids "pertain to a device. Each ID is only used once and is guaranteed never to change", so they are
# written here as numbers (older bindings lack some constants).
FI_NVLINK_LINK_COUNT = 91  # NVML_FI_DEV_NVLINK_LINK_COUNT: "Number of NVLinks present on the device"
FI_RECOVERY_ACTION = 230  # NVML_FI_DEV_GET_GPU_RECOVERY_ACTION (nvmlDeviceGpuRecoveryAction_t)
FI_LINK_RECOVERY_FAILED = (
    214  # NVML_FI_DEV_NVLINK_COUNT_LINK_RECOVERY_FAILED_EVENTS (NVLink5), scopeId = link
)
# NVML_FI_DEV_CLOCKS_EVENT_REASON_{SW_THERM,HW_THERM,HW_POWER_BRAKE}_SLOWDOWN: cumulative nanoseconds
FI_SLOWDOWN_NS = {"sw_thermal": 269, "hw_thermal": 270, "hw_power_brake": 271}
NVLINK_MAX_LINKS = 36  # NVML_NVLINK_MAX_LINKS in nvml.h 13.3 (18 from NVML 11.8 to 13.2): an array bound
# nvmlNvLinkErrorCounter_t: DL_REPLAY 0, DL_RECOVERY 1, DL_CRC_FLIT 2, DL_CRC_DATA 3, DL_ECC_DATA 4
NVLINK_COUNTERS = {"replay": 0, "recovery": 1, "crc_flit": 2, "crc_data": 3, "ecc_data": 4}
VGPU_GUEST = 2  # NVML_GPU_VIRTUALIZATION_MODE_VGPU: "Device is associated with vGPU inside virtual machine"
VIRTUALIZATION = {0: "none", 1: "passthrough", 2: "vgpu", 3: "host_vgpu", 4: "host_vsga"}
CORRUPTED_INFOROM = 14  # NVML_ERROR_CORRUPTED_INFOROM


class FabricInfoV1(ctypes.Structure):
    """nvmlGpuFabricInfo_t (nvml.h): 28 bytes."""

    _fields_ = [
        ("clusterUuid", ctypes.c_ubyte * 16),
        ("status", ctypes.c_int),
        ("cliqueId", ctypes.c_uint),
        ("state", ctypes.c_ubyte),
    ]


class FabricInfoV2(ctypes.Structure):
    """nvmlGpuFabricInfo_v2_t (nvml.h): 36 bytes, version 0x02000024."""

    _fields_ = [
        ("version", ctypes.c_uint),
        ("clusterUuid", ctypes.c_ubyte * 16),
        ("status", ctypes.c_int),
        ("cliqueId", ctypes.c_uint),
        ("state", ctypes.c_ubyte),
        ("healthMask", ctypes.c_uint),
    ]


class FabricInfoV3(ctypes.Structure):
    """nvmlGpuFabricInfo_v3_t (nvml.h, nvmlGpuFabricInfoV_t): 40 bytes, version 0x03000028."""

    _fields_ = [*FabricInfoV2._fields_, ("healthSummary", ctypes.c_ubyte)]


def _struct_version(struct: type[ctypes.Structure], version: int) -> int:
    """NVML_STRUCT_VERSION: sizeof(struct) | version << 24."""
    return ctypes.sizeof(struct) | version << 24


# NVML's own codes that mean "this driver cannot answer this query": the answer is absence.
ARGUMENT_VERSION_MISMATCH, FUNCTION_NOT_FOUND = 25, 13


def fabric(fields: Fields, h: Any) -> dict[str, Any] | Missing:
    """The GPU's NVLink fabric registration: `state` (nvmlGpuFabricState_t: 0 not supported, 1 not started, 2 in
    progress, 3 completed), `status` (an nvmlReturn_t, meaningful only once completed), `health_mask` and
    `health_summary` where the driver gives them (v2, v3), `version` of the structure the driver answered."""
    for version, struct in ((3, FabricInfoV3), (2, FabricInfoV2)):
        info = struct()
        info.version = _struct_version(struct, version)
        got = fields.read("nvmlDeviceGetGpuFabricInfoV", h, ctypes.byref(info))
        if not isinstance(got, Missing):
            return _fabric_dict(info, version)
        if got.code not in (ARGUMENT_VERSION_MISMATCH, FUNCTION_NOT_FOUND) and got.error != Missing.NO_CALL:
            return got
    info1 = FabricInfoV1()
    got = fields.read("nvmlDeviceGetGpuFabricInfo", h, ctypes.byref(info1))
    return got if isinstance(got, Missing) else _fabric_dict(info1, 1)


def _fabric_dict(info: Any, version: int) -> dict[str, Any]:
    out: dict[str, Any] = {"version": version, "state": int(info.state) & 0xFF, "status": int(info.status)}
    out["clique_id"] = int(info.cliqueId)
    if version >= 2:
        out["health_mask"] = int(info.healthMask)
    if version >= 3:
        out["health_summary"] = int(info.healthSummary)
    return out


def field_values(fields: Fields, h: Any, ids: list[Any]) -> list[int | Missing] | Missing:
    """nvmlDeviceGetFieldValues: each id's value (an integer) or why not; an id is a field id or (id, scope). The
    whole call fails only for a bad device; each entry carries its own nvmlReturn (nvml.h)."""
    got = fields.read("nvmlDeviceGetFieldValues", h, ids, convert=list)
    if isinstance(got, Missing):
        return got
    out: list[int | Missing] = []
    for entry in got:
        rc = int(getattr(entry, "nvmlReturn", 0))
        if rc != 0:
            out.append(Missing("nvmlDeviceGetFieldValues", f"NVML error {rc}", fields.unsupported(rc), rc))
            continue
        out.append(_number(entry))
    return out


# NVML_VALUE_TYPE_*: 0 double, 1 unsigned int, 2 unsigned long, 3 unsigned long long, 4 signed long long,
# 5 signed int, 6 unsigned short
_MEMBERS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}


def _number(entry: Any) -> int | Missing:
    """One entry's value by its valueType. nvidia-ml-py up to 12.550 declares c_nvmlValue_t without usVal: an
    unsigned short is then the union's low 16 bits (its first member's bytes, little-endian). A value that is no
    number (a NaN double) is said, not raised: the reader must not end on one field."""
    kind = int(getattr(entry, "valueType", 1))
    value = entry.value
    try:
        if kind == 6 and not hasattr(value, "usVal"):
            return int(value.ullVal) & 0xFFFF
        return int(getattr(value, _MEMBERS.get(kind, "ullVal")))
    except (AttributeError, TypeError, ValueError, OverflowError) as exc:
        return Missing("nvmlDeviceGetFieldValues", f"value of type {kind} unreadable: {exc}")


def field(fields: Fields, h: Any, fid: Any) -> int | Missing:
    """One field's value, or why not."""
    got = field_values(fields, h, [fid])
    if isinstance(got, Missing):
        return got
    return got[0] if got else Missing("nvmlDeviceGetFieldValues", "no value returned")


def nvlinks(fields: Fields, h: Any) -> dict[str, Any] | Missing:
    """The GPU's own link count (field 91; 0: no NVLink), each link's state below it (1 active, 0 inactive; a link
    NVML answers with an error keeps the error) and its error counters (replay, recovery, CRC, ECC; Blackwell+: the
    failed link recoveries, fields 161-163 being 'unsupported for Blackwell+', nvml.h)."""
    count = field(fields, h, FI_NVLINK_LINK_COUNT)
    if isinstance(count, Missing):
        return count
    links: list[dict[str, Any]] = []
    for link in range(min(max(count, 0), NVLINK_MAX_LINKS)):
        state = fields.read("nvmlDeviceGetNvLinkState", h, link, convert=int)
        entry: dict[str, Any] = {"link": link}
        if isinstance(state, Missing):
            entry["error"] = state.error
            entry["not_supported"] = state.not_supported
            links.append(entry)
            continue
        entry["active"] = state == 1
        entry.update(link_counters(fields, h, link))
        links.append(entry)
    return {"count": count, "links": links}


def link_counters(fields: Fields, h: Any, link: int) -> dict[str, int]:
    """One link's error counters NVML answers (replay, recovery, crc_flit, crc_data, ecc_data; recovery_failed on
    NVLink5), cumulative since they were last reset."""
    out: dict[str, int] = {}
    for name, counter in NVLINK_COUNTERS.items():
        got = fields.read("nvmlDeviceGetNvLinkErrorCounter", h, link, counter, convert=int)
        if not isinstance(got, Missing):
            out[name] = got
    failed = field(fields, h, (FI_LINK_RECOVERY_FAILED, link))
    if not isinstance(failed, Missing):
        out["recovery_failed"] = failed
    return out


def virtualization(fields: Fields, h: Any) -> str | Missing:
    """'none' (bare metal), 'passthrough', 'vgpu' (a guest's vGPU), 'host_vgpu' or 'host_vsga' (a hypervisor's)."""
    return fields.read(
        "nvmlDeviceGetVirtualizationMode", h, convert=lambda v: VIRTUALIZATION.get(int(v), str(int(v)))
    )


def vgpu_license(fields: Fields, h: Any) -> dict[str, Any] | Missing:
    """Inside a vGPU guest: whether licensing applies, and each licensable feature's code, product name, whether it
    is enabled and whether it is licensed now (nvmlGridLicensableFeatures_t: featureState 'non-zero if feature is
    currently licensed', featureEnabled 'non-zero if feature is enabled'), with the licence expiry's status."""

    def convert(got: Any) -> dict[str, Any]:
        features = []
        for k in range(min(int(got.licensableFeaturesCount), 3)):  # NVML_GRID_LICENSE_FEATURE_MAX_COUNT
            f = got.gridLicensableFeatures[k]
            expiry = getattr(f, "licenseExpiry", None)
            features.append(
                {
                    "code": int(f.featureCode),
                    "product": text(getattr(f, "productName", b""))[:64],
                    "enabled": bool(f.featureEnabled),
                    "licensed": bool(f.featureState),
                    "expiry_status": int(expiry.status) if expiry is not None else None,
                }
            )
        return {"supported": bool(got.isGridLicenseSupported), "features": features}

    return fields.read("nvmlDeviceGetGridLicensableFeatures_v4", h, convert=convert)


def inforom(fields: Fields, h: Any) -> bool | Missing:
    """True when the InfoROM validates; False when NVML says it is corrupted (NVML_ERROR_CORRUPTED_INFOROM)."""
    got = fields.read("nvmlDeviceValidateInforom", h, convert=lambda _: True)
    if isinstance(got, Missing) and got.code == CORRUPTED_INFOROM:
        return False
    return got


def repair_pending(fields: Fields, h: Any) -> dict[str, bool] | Missing:
    """Channel and TPC repairs waiting for a GPU reset (nvmlDeviceGetRepairStatus, nvidia-ml-py 13.580 and newer)."""
    return fields.read(
        "nvmlDeviceGetRepairStatus",
        h,
        convert=lambda r: {"channel": bool(r[0]), "tpc": bool(r[1])},
    )


def slowdown_ns(fields: Fields, h: Any) -> dict[str, int]:
    """The cumulative time (ns) each slowdown held the clocks down since the driver loaded; only those NVML gives."""
    got = field_values(fields, h, list(FI_SLOWDOWN_NS.values()))
    if isinstance(got, Missing):
        return {}
    return {name: v for name, v in zip(FI_SLOWDOWN_NS, got, strict=False) if not isinstance(v, Missing)}


def drained(fields: Fields, pci: str) -> bool | Missing:
    """Whether the GPU at this PCI address was drained with nvmlDeviceModifyDrainState: 'Any new NVML process will no
    longer see this GPU' (nvml.h), so a drained GPU is absent from NVML's list without being lost."""
    pynvml = fields.pynvml
    info_type = getattr(pynvml, "nvmlPciInfo_t", None)
    if info_type is None:
        return Missing("nvmlDeviceQueryDrainState", Missing.NO_CALL)
    info = info_type()
    try:
        domain, bus, rest = pci.split(":")
        # NVML documents the numeric domain, bus and device as the address; the string is filled too, for a
        # driver that reads it (nvml.h's 'domain:bus:device.function' with an 8-digit domain, upper case)
        info.domain, info.bus, info.device = int(domain, 16), int(bus, 16), int(rest.split(".")[0], 16)
        info.busId = f"{int(domain, 16):08X}:{bus.upper()}:{rest.upper()}".encode()
    except (AttributeError, TypeError, ValueError):
        return Missing("nvmlDeviceQueryDrainState", "cannot build the PCI address")
    return fields.read("nvmlDeviceQueryDrainState", info, convert=lambda v: int(v) == 1)


def link_states(fields: Fields, h: Any) -> list[int]:
    """Each NVLink's state (1 active, 0 inactive or unreadable) below the GPU's own link count; where NVML cannot
    give the count (bindings or a driver without field values), the links up to the first that NVML does not
    answer. States only: a node profile needs no error counters (six more calls a link)."""
    count = field(fields, h, FI_NVLINK_LINK_COUNT)
    known = not isinstance(count, Missing)
    states: list[int] = []
    for link in range(
        NVLINK_MAX_LINKS if isinstance(count, Missing) else min(max(count, 0), NVLINK_MAX_LINKS)
    ):
        state = fields.read("nvmlDeviceGetNvLinkState", h, link, convert=int)
        if isinstance(state, Missing):
            if not known:  # past the GPU's last link, or no NVLink at all
                break
            states.append(0)
            continue
        states.append(1 if state == 1 else 0)
    return states
