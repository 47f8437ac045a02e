"""What the DCGM checks read, declared for the evidence map (envcheck.core.evidence): one Source per DCGM source,
and one HealthSystem per DCGM health-watch system with DCGM's rule and how envcheck judges an incident of it. Pure
data: the rules' citations are NVIDIA/DCGM paths at tag v4.6.0 unless a tag is named."""

from __future__ import annotations

from dataclasses import dataclass

from envcheck.core.evidence import Kind, Source

HW = "NVIDIA/DCGM modules/health/DcgmHealthWatch.cpp"
_DIAG_TESTS = ("tests/checks/dcgm/test_dcgm.py", "tests/checks/dcgm/test_diag_json.py")
_HEALTH_TESTS = (
    "tests/checks/dcgm/test_health.py",
    "tests/checks/dcgm/test_health_doc.py",
    "tests/cluster/test_shared_nodes.py",
)
_ENGINE_TESTS = ("tests/checks/dcgm/test_hostengine.py", "tests/checks/dcgm/test_dcgm.py")
_ENGINE_CODES = ("dcgm.hostengine_hang", "dcgm.hostengine_down", "dcgm.hostengine_unreachable")

EVIDENCE: tuple[Source, ...] = (
    Source(
        "dcgmi diag -r 1|2 -j [-i <free GPUs>]",
        Kind.COMMAND,
        "DCGM's diagnostic document: each test's status, its errors (DCGM_FR code, severity, category, or the "
        "message text in 2.x), the GPU ids and serials; every writer version 2.1.4-4.6.0",
        ("dcgm.diag.<test>", "dcgm.config", "dcgm.no_result", *_ENGINE_CODES),
        "NVIDIA/DCGM dcgmi/Diag.cpp and nvvs/include/NvvsJsonStrings.h per tag; dcgmErrorMeta in "
        "dcgmlib/src/dcgm_errors.c",
        (*_DIAG_TESTS, "tests/cluster/test_shared_nodes.py"),
        key="diag",
    ),
    Source(
        "dcgmi health -g g|a|s -c -j",
        Kind.COMMAND,
        "DCGM's health-watch report on its built-in groups (all GPUs, all entities, NVSwitches): overall health, "
        "each entity's incidents per system with DCGM's health word and message (DCGM_FR code recovered from the "
        "text); whether watches are set",
        ("dcgm.health.<system>", "dcgm.health.overall", "dcgm.health_unread", *_ENGINE_CODES),
        "NVIDIA/DCGM dcgmi/Health.cpp (CheckWatches, HandleOneEntity, AddErrorMessage; the 2.1.4/2.3.4 inline "
        f"writer), dcgmi/DcgmiOutput.cpp, {HW}, dcgmlib/dcgm_errors.h *_MSG",
        _HEALTH_TESTS,
        key="health",
    ),
    Source(
        "dcgmi -v",
        Kind.COMMAND,
        "dcgmi's own version ('Version : X.Y.Z', DcgmBuildInfo), read only when the health report has incidents",
        (),
        "NVIDIA/DCGM dcgmi/Version.cpp, common/DcgmBuildInfo.cpp.in",
        ("tests/checks/dcgm/test_health.py",),
        qualifies="dcgm.health.<system>: whether dcgmi's entity keys are GPU ids (2.4.7+) or health values "
        "(2.1-2.3)",
        key="version",
    ),
    Source(
        "nv-hostengine",
        Kind.DAEMON,
        "whether an nv-hostengine process exists (/proc/<pid>/cmdline) where this process sees the host's "
        "processes, and each one's state and wchan",
        _ENGINE_CODES,
        "envcheck.probe.daemons; dcgmi/Command.cpp's connection errors (every tag 2.1.4-4.6.0)",
        _ENGINE_TESTS,
        key="hostengine",
    ),
    Source(
        "nvidia-smi --query-gpu=index,mig.mode.current",
        Kind.COMMAND,
        "which GPUs have MIG enabled",
        (),
        "NVIDIA's dcgmi diag reference: the diagnostic does not run on MIG instances",
        ("tests/checks/dcgm/test_dcgm.py",),
        qualifies="dcgm.diag: skipped under MIG",
        key="MIG",
    ),
    Source(
        "nvmlDeviceGetComputeRunningProcesses, nvmlDeviceGetPciInfo (probe.gpu_usage)",
        Kind.NVML,
        "the processes on each GPU and each NVML index's PCI address",
        (),
        "DCGM's GPU id is the NVML index: dcgmlib/src/DcgmCacheManager.cpp",
        ("tests/checks/dcgm/test_health.py", "tests/cluster/test_shared_nodes.py"),
        qualifies="dcgm.diag's -i (the GPUs nobody holds); the PCI address a DCGM finding names",
        key="processes",
    ),
)


@dataclass(frozen=True)
class HealthSystem:
    """One DCGM health-watch system: its enum and value (dcgmlib/dcgm_structs.h), dcgmi's label, what DCGM's rule
    judges (cited), and how envcheck judges an incident of it."""

    name: str
    enum: str
    value: int
    label: str
    judges: str
    rule: str
    code: str
    verdict: str


_BY_WORD = "Failure: FAIL (node, drains); Warning: WARN"
HEALTH_SYSTEMS: tuple[HealthSystem, ...] = (
    HealthSystem(
        "PCIe",
        "DCGM_HEALTH_WATCH_PCIE",
        0x1,
        "PCIe system",
        "PCIe replays in the last minute above the link's rate for its generation and width (8 a minute before "
        "3.3.8), Warning; XIDs 38, 39, 42 (4.4.1+), Warning",
        f"{HW}: MonitorPcie, GetExpectedPcieReplayRate, BuildXidMappings",
        "dcgm.health.pcie",
        "WARN (DCGM reports only Warning)",
    ),
    HealthSystem(
        "NVLink",
        "DCGM_HEALTH_WATCH_NVLINK",
        0x2,
        "NVLINK system",
        "NVLink replay/recovery errors, CRC errors at 100/s and more (Failure; fewer: Warning), NVLink5 counters "
        "and BER (4.3.1+), every link Down, fabric health and Fabric Manager state (4.5.0+), IMEX (global), XIDs "
        "67, 73, 121, 137 (Warning)",
        f"{HW}: MonitorNVLink4Fields, MonitorNVLink5Fields, MonitorNVLinkStatus, MonitorFabricFields, MonitorImex",
        "dcgm.health.nvlink",
        _BY_WORD,
    ),
    HealthSystem(
        "PMU",
        "DCGM_HEALTH_WATCH_PMU",
        0x4,
        "PMU system",
        "nothing: DCGM has no rule for it (no Set/Monitor function; no -s letter sets it)",
        f"{HW}: the default cases of SetWatches and MonitorWatches",
        "dcgm.health.pmu",
        f"{_BY_WORD}, were DCGM ever to report one",
    ),
    HealthSystem(
        "MCU",
        "DCGM_HEALTH_WATCH_MCU",
        0x8,
        "MCU system",
        "nothing: DCGM has no rule for it (no Set/Monitor function; no -s letter sets it)",
        f"{HW}: the default cases of SetWatches and MonitorWatches",
        "dcgm.health.mcu",
        f"{_BY_WORD}, were DCGM ever to report one",
    ),
    HealthSystem(
        "memory",
        "DCGM_HEALTH_WATCH_MEM",
        0x10,
        "Memory system",
        "volatile double-bit ECC errors, 63+ retired pages, DBE retirements past 15 and growing, row-remap failure, "
        "unrepairable memory (4.5.0+): Failure; a pending retirement, the uncorrectable row-remap limit (4.6.0), "
        "XIDs 31, 32, 43, 63: Warning; XID 64: Failure (4.6.0)",
        f"{HW}: MonitorMem and its helpers, BuildXidMappings",
        "dcgm.health.memory",
        _BY_WORD,
    ),
    HealthSystem(
        "SM",
        "DCGM_HEALTH_WATCH_SM",
        0x20,
        "SM system",
        "nothing: DCGM has no rule for it (dcgmi health -f shows it; `-s a` does not select it in 4.6)",
        f"{HW}: the default cases of SetWatches and MonitorWatches",
        "dcgm.health.sm",
        f"{_BY_WORD}, were DCGM ever to report one",
    ),
    HealthSystem(
        "InfoROM",
        "DCGM_HEALTH_WATCH_INFOROM",
        0x40,
        "InfoROM system",
        "the InfoROM checksum invalid (read hourly); XID 93 on Volta: Warning",
        f"{HW}: MonitorInforom, BuildXidMappings",
        "dcgm.health.inforom",
        "WARN (DCGM reports only Warning)",
    ),
    HealthSystem(
        "thermal",
        "DCGM_HEALTH_WATCH_THERMAL",
        0x80,
        "Thermal system",
        "thermal violation time grew in the last minute, XIDs 60-62: Warning; a CPU's temperature at its warning "
        "(Warning) or critical (Failure) threshold (3.3.1+)",
        f"{HW}: MonitorThermal, MonitorCpuThermal",
        "dcgm.health.thermal",
        _BY_WORD,
    ),
    HealthSystem(
        "power",
        "DCGM_HEALTH_WATCH_POWER",
        0x100,
        "Power system",
        "power unreadable, power violation time grew in the last minute, XIDs 54, 56, 57, 58, 78: Warning; a CPU "
        "at its power limit: Failure (3.3.1+)",
        f"{HW}: MonitorPower, MonitorCpuPower",
        "dcgm.health.power",
        _BY_WORD,
    ),
    HealthSystem(
        "driver",
        "DCGM_HEALTH_WATCH_DRIVER",
        0x200,
        "Driver",
        "NVML's GPU recovery action: GPU_RESET, NODE_REBOOT, DRAIN_AND_RESET: Failure; DRAIN_P2P: Warning (4.5.0+)",
        f"{HW}: MonitorGpuRecoveryAction",
        "dcgm.health.driver",
        _BY_WORD,
    ),
    HealthSystem(
        "NVSwitch non-fatal",
        "DCGM_HEALTH_WATCH_NVSWITCH_NONFATAL",
        0x400,
        "Internal error",
        "an NVSwitch's non-fatal SXid count above 0 in the last minute: Warning",
        f"{HW}: MonitorNvSwitchErrorCounts; dcgmi/Health.cpp HelperSystemToString has no case (Internal error)",
        "dcgm.health.nvswitch_nonfatal",
        "WARN (DCGM reports only Warning)",
    ),
    HealthSystem(
        "NVSwitch fatal",
        "DCGM_HEALTH_WATCH_NVSWITCH_FATAL",
        0x800,
        "Internal error",
        "an NVSwitch's fatal SXid count above 0 in the last minute, or every switch link Down: Failure",
        f"{HW}: MonitorNvSwitchErrorCounts; dcgmi/Health.cpp HelperSystemToString has no case (Internal error)",
        "dcgm.health.nvswitch_fatal",
        "FAIL (node, drains)",
    ),
    HealthSystem(
        "ConnectX",
        "DCGM_HEALTH_WATCH_CONNECTX",
        0x1000,
        "ConnectX system",
        "a ConnectX's health status not OK: Warning; unmasked uncorrectable errors: Failure when DCGM's severity "
        "bit is set, else Warning (4.5.3+)",
        f"{HW}: MonitorConnectX",
        "dcgm.health.connectx",
        _BY_WORD,
    ),
    HealthSystem(
        "devastating XIDs",
        "DCGM_HEALTH_WATCH_ALL",
        0xFFFFFFFF,
        "Internal error",
        "XIDs 48, 74, 79, 95, 119, 120, 140 since the host engine started: Failure; 94: Warning (4.6.0; Failure "
        "4.4.2-4.5.3); recorded when a memory or InfoROM watch subscribes the XID field (4.4.2+)",
        f"{HW}: BuildXidMappings, MonitorDevastatingXids",
        "dcgm.health.xid",
        _BY_WORD,
    ),
)
