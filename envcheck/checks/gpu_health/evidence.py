"""What gpu.health reads on a node, source by source (envcheck.core.evidence): each NVML query, each file under /proc,
/sys and /dev, each daemon; the kernel log's catalogues are declared beside their parsers (log_evidence)."""

from __future__ import annotations

from envcheck.checks.cuda.finding import CAPABILITIES, CONTAINER
from envcheck.checks.gpu_health import driver_causes as causes
from envcheck.checks.gpu_health import fabric_findings as fabric
from envcheck.checks.gpu_health import gpu_findings as gpu
from envcheck.checks.gpu_health import node, nvml_down
from envcheck.checks.gpu_health import state_findings as state
from envcheck.checks.gpu_health.verdict import KERNEL_LOG_UNREADABLE
from envcheck.core.evidence import Kind, Source

NVML_H = "nvml.h (NVML 13.3.29, NVIDIA/go-nvml gen/nvml/nvml.h)"
DCGM = "DCGM 4.6 modules/health/DcgmHealthWatch.cpp"
HEALTH_TESTS = ("tests/checks/gpu_health/test_gpu_health.py",)
SURFACE_TESTS = ("tests/checks/gpu_health/test_nvml_surface.py", "tests/cluster/test_shared_nodes.py")
NODE_TESTS = ("tests/cluster/test_shared_nodes.py",)


def _nvml(
    name: str,
    reads: str,
    codes: tuple[str, ...],
    rule: str,
    tests: tuple[str, ...],
    key: str,
    qualifies: str = "",
) -> Source:
    return Source(name, Kind.NVML, reads, codes, rule, tests, qualifies=qualifies, key=key)


NVML_SOURCES: tuple[Source, ...] = (
    _nvml(
        "nvmlInit / nvmlDeviceGetCount",
        "whether NVML starts, its error code, and how many GPUs it lists",
        (nvml_down.API_MISMATCH, nvml_down.NOT_LOADED, nvml_down.USERSPACE_MISSING, CAPABILITIES, CONTAINER),
        f"{NVML_H}: NVML_ERROR_DRIVER_NOT_LOADED 9, LIBRARY_NOT_FOUND 12, LIB_RM_VERSION_MISMATCH 18; each cause "
        "confirmed by a direct source (the kernel's module list, /proc/driver/nvidia/version, the container's facts)",
        (*HEALTH_TESTS, "tests/checks/gpu_health/test_kernel_events.py", *NODE_TESTS),
        key="nvml_error",
    ),
    _nvml(
        "nvmlDeviceGetHandleByIndex and every per-GPU call",
        "NVML_ERROR_GPU_IS_LOST (15) or RESET_REQUIRED (16) on any call; a call that does not return in 15 s",
        (node.GPU_LOST, node.NVML_HANG, node.GPU_INIT_SLOW),
        f"{NVML_H}: 15 'The GPU has fallen off the bus or has otherwise become inaccessible', 16 'The GPU requires "
        "a reset before it can be used again'; a hung call is the thread's kernel state (probe.hang)",
        (*HEALTH_TESTS, *NODE_TESTS),
        key="GPU is lost",
    ),
    _nvml(
        "nvmlDeviceGetTotalEccErrors",
        "volatile and aggregate, corrected and uncorrected ECC counts",
        (gpu.ECC_UNCORRECTABLE,),
        f"{DCGM} MonitorMem: volatile DBE > 0 FAIL",
        HEALTH_TESTS,
        key="ecc_volatile_uncorrected",
    ),
    _nvml(
        "nvmlDeviceGetRetiredPages / nvmlDeviceGetRetiredPagesPendingStatus",
        "pages retired for SBE and DBE, and whether a retirement waits for a reset",
        (gpu.RETIREMENT_PENDING,),
        f"{NVML_H}: 'pending retirement and need a reboot to fully retire'",
        HEALTH_TESTS,
        key="retired_pages_pending",
    ),
    _nvml(
        "nvmlDeviceGetRemappedRows",
        "corrected and uncorrected remapped rows, a remap pending, a remap that failed",
        (gpu.ROW_REMAP_PENDING, gpu.ROW_REMAP_FAILED),
        f"{NVML_H}: 'A reset will be required to actually remap the row'; {DCGM}: row remap failure FAIL",
        HEALTH_TESTS,
        key="remapped_rows",
    ),
    _nvml(
        "nvmlDeviceGetCurr/MaxPcieLinkGeneration, nvmlDeviceGetCurr/MaxPcieLinkWidth",
        "the PCIe link's generation and width against its maximum",
        (gpu.PCIE_DEGRADED,),
        "a link narrower than its maximum; slower only while another process loads the GPU (an idle GPU drops "
        "its generation to save power)",
        HEALTH_TESTS,
        key="pcie_width",
    ),
    _nvml(
        "nvmlDeviceGetCurrentClocksEventReasons (older: ...ClocksThrottleReasons) and fields 269-271",
        "the clock-event reasons, sampled again after one second with the slowdowns' cumulative durations",
        (gpu.CLOCKS_SLOWDOWN,),
        f"{NVML_H}: HW slowdown 'may be also reported during PState or clock change'; {DCGM} MonitorThermal and "
        "MonitorPower: violation time growing in the window WARN; gpud hw-slowdown: events in 6 of 10 minutes",
        (*HEALTH_TESTS, *SURFACE_TESTS),
        key="slowdown",
    ),
    _nvml(
        "nvmlDeviceGetPersistenceMode",
        "whether persistence mode is on",
        (gpu.PERSISTENCE_OFF,),
        "NVIDIA's Driver Persistence doc: with it off every client pays the GPU's initialisation",
        HEALTH_TESTS,
        key="persistence",
    ),
    _nvml(
        "nvmlDeviceGetGpuFabricInfoV (v3, v2) / nvmlDeviceGetGpuFabricInfo (v1)",
        "fabric registration state, its status once completed, the health mask and summary",
        (fabric.FABRIC_NOT_STARTED, fabric.FABRIC_IN_PROGRESS, fabric.FABRIC_FAILED, fabric.FABRIC_DEGRADED),
        f"{NVML_H} nvmlGpuFabricInfo_v3_t; {DCGM} MonitorFabricFields and DcgmCacheManager.cpp GetFMStatusFromStruct",
        SURFACE_TESTS,
        key="fabric",
    ),
    _nvml(
        "nvmlDeviceGetFieldValues: NVML_FI_DEV_NVLINK_LINK_COUNT (91), nvmlDeviceGetNvLinkState",
        "the GPU's own NVLink count and each of its links' state",
        (fabric.NVLINK_DOWN,),
        f"{DCGM} MonitorNVLinkStatus: a Down link FAILs, none of a MIG GPU's; NVIDIA/NVSentinel#1481 (all links "
        "of a PCIe card without a bridge are inactive)",
        SURFACE_TESTS,
        key="nvlink",
    ),
    _nvml(
        "nvmlDeviceGetNvLinkErrorCounter; field 214 (NVLink5 failed recoveries)",
        "each link's replay, recovery, CRC and ECC counters, read again after one second where not zero",
        (fabric.NVLINK_ERRORS,),
        f"{DCGM} MonitorNVLink4Fields (an error within the window FAILs; CRC at 100/s, DcgmGPUHardwareLimits.h) "
        "and MonitorNVLinkErrorFields (failed recoveries FAIL)",
        SURFACE_TESTS,
        key="nvlink_counters",
    ),
    _nvml(
        "nvmlDeviceGetFieldValues: NVML_FI_DEV_GET_GPU_RECOVERY_ACTION (230)",
        "the driver's recovery action now (none, GPU reset, node reboot, drain P2P, drain and reset, ...)",
        (state.RECOVERY_ACTION,),
        f"{NVML_H} nvmlDeviceGpuRecoveryAction_t; {DCGM} MonitorGpuRecoveryAction; followed over the kernel log's "
        "last Xid 154 when the two disagree (NVML reads the state now)",
        SURFACE_TESTS,
        key="recovery_action",
    ),
    _nvml(
        "nvmlDeviceGetVirtualizationMode / nvmlDeviceGetGridLicensableFeatures_v4",
        "bare metal, pass-through or a vGPU guest; a guest's licensable features, enabled and licensed",
        (state.VGPU_UNLICENSED,),
        "NVIDIA AI Enterprise, vGPU for Compute Licensing: 'enters a degraded state after a 20-minute grace period'",
        SURFACE_TESTS,
        key="vgpu_license",
    ),
    _nvml(
        "nvmlDeviceValidateInforom",
        "whether the InfoROM validates (NVML_ERROR_CORRUPTED_INFOROM 14)",
        (state.INFOROM_CORRUPT,),
        f"{DCGM} MonitorInforom: invalid WARN",
        SURFACE_TESTS,
        key="inforom",
    ),
    _nvml(
        "nvmlDeviceGetRepairStatus",
        "channel and TPC repairs pending a GPU reset",
        (state.REPAIR_PENDING,),
        f"{NVML_H} nvmlRepairStatus_t (nvidia-ml-py 13.580 and newer)",
        SURFACE_TESTS,
        key="repair_pending",
    ),
    _nvml(
        "nvmlDeviceQueryDrainState",
        "whether a GPU on the PCI bus that NVML does not list was drained by an operator",
        (),
        f"{NVML_H}: a drained GPU: 'Any new NVML process will no longer see this GPU'",
        SURFACE_TESTS,
        qualifies=f"{node.GPU_LOST}: a drained GPU is not lost",
        key="drained",
    ),
    _nvml(
        "nvmlDeviceGetComputeRunningProcesses / GetGraphicsRunningProcesses / GetMemoryInfo / GetComputeMode",
        "who holds each GPU and how much of its memory",
        (),
        "a GPU busy with another job is not a fault (probe.gpu_usage)",
        (*HEALTH_TESTS, *NODE_TESTS),
        qualifies=f"{gpu.PCIE_DEGRADED} (a slow link counts only under load), node.cuda_driver's busy GPUs",
        key="processes",
    ),
    _nvml(
        "nvmlDeviceGetMigMode",
        "whether MIG is on",
        (),
        "DCGM 4.5.0: NVML reports a MIG GPU's links as down",
        SURFACE_TESTS,
        qualifies=f"{fabric.NVLINK_DOWN}: a MIG GPU's links are not judged",
        key="mig",
    ),
)

FILE_SOURCES: tuple[Source, ...] = (
    Source(
        "/sys/bus/pci/devices/*/{vendor,class,driver}",
        Kind.FILE,
        "the NVIDIA GPUs (class 0x0300, 0x0302) and NVSwitches (0x0680) on the PCI bus, and the driver bound to each",
        (node.GPU_LOST, nvml_down.NOT_LOADED),
        "sysfs is not namespaced: the hardware's own list, whatever the driver says; vfio-pci GPUs are a VM's",
        (*HEALTH_TESTS, *NODE_TESTS),
        qualifies=f"{fabric.NVLINK_DOWN}: NVSwitches say the node's NVLinks are wired",
        key="pci_gpus",
    ),
    Source(
        "/proc/driver/nvidia/version, /proc/driver/nvidia/gpus/*/information",
        Kind.FILE,
        "the loaded kernel module's version; each GPU the driver took (minor, UUID, excluded)",
        (nvml_down.API_MISMATCH,),
        "kernel-open/nvidia/nv-procfs.c; the container toolkit's tmpfs over it lists only the given GPUs "
        "(libnvidia-container nvc_mount.c)",
        ("tests/checks/gpu_health/test_kernel_events.py", *NODE_TESTS),
        key="kernel_module",
    ),
    Source(
        "/sys/module/<name>/initstate (else /proc/modules)",
        Kind.FILE,
        "the kernel's own list of loaded modules (nvidia, nvidia_uvm, ...)",
        (nvml_down.NOT_LOADED,),
        "Documentation/ABI/testing/sysfs-module, kernel/module/procfs.c m_show; not namespaced (a container reads "
        "the host's); the direct source for "
        "'not loaded', where a missing /proc/driver/nvidia or /dev node is a proxy",
        ("tests/probe/test_modules_daemons.py",),
        key="modules",
    ),
    Source(
        "/dev/nvidia*, /proc/self/mountinfo, NVIDIA_VISIBLE_DEVICES, CUDA_VISIBLE_DEVICES",
        Kind.FILE,
        "which GPUs this process was given: access(2) on each device node (EPERM: a device cgroup), the toolkit's "
        "tmpfs at /proc/driver/nvidia, the toolkit's variables",
        (node.GPU_LOST,),
        "probe.gpu_access: a GPU not given is never judged, never lost",
        ("tests/probe/test_gpu_access.py", *NODE_TESTS),
        key="given",
    ),
    Source(
        "/dev/kmsg (or a saved dmesg, journal or syslog)",
        Kind.FILE,
        "the kernel log's records, read without blocking after the last run's cursor",
        (KERNEL_LOG_UNREADABLE, node.FELL_OFF_BUS, causes.INIT_FAILED),
        "Documentation/ABI/testing/dev-kmsg; the catalogues each record is judged by are listed as kernel-log "
        "sources",
        ("tests/probe/test_log_records.py", "tests/checks/gpu_health/test_field_corpus.py"),
        key="kernel_log",
    ),
)

DAEMON_SOURCES: tuple[Source, ...] = (
    Source(
        "nvidia-fabricmanager (an nv-fabricmanager process)",
        Kind.DAEMON,
        "whether the fabric manager runs: its process where the host's processes are visible",
        (),
        "a daemon is alive when its process is (gpud's proxy is port 6666 open)",
        ("tests/checks/gpu_health/test_nvml_surface.py", "tests/probe/test_modules_daemons.py"),
        qualifies=f"{fabric.FABRIC_NOT_STARTED}: names the fabric manager's state",
        key="nvidia-fabricmanager",
    ),
    Source(
        "nvidia-persistenced (its process, or its socket accepting a connection)",
        Kind.DAEMON,
        "whether the persistence daemon keeps the GPUs initialised: a live process or a socket that accepts",
        (),
        "a socket file outlives a daemon killed without cleanup (connect(2): ECONNREFUSED)",
        ("tests/probe/test_modules_daemons.py",),
        qualifies=f"{node.GPU_INIT_SLOW}: the first initialisation's budget (cold without the daemon)",
        key="nvidia-persistenced",
    ),
)

EVIDENCE: tuple[Source, ...] = (*NVML_SOURCES, *FILE_SOURCES, *DAEMON_SOURCES)
