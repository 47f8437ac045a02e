"""What gpu.health reads of NVML, query by query (envcheck.core.evidence); host_sources declares the rest."""

from __future__ import annotations

from envcheck.checks.cuda.finding import CAPABILITIES, CONTAINER
from envcheck.checks.gpu_health import clock_findings as clock
from envcheck.checks.gpu_health import fabric_findings as fabric
from envcheck.checks.gpu_health import gpu_findings as gpu
from envcheck.checks.gpu_health import node, nvml_down
from envcheck.checks.gpu_health import state_findings as state
from envcheck.core.evidence import Kind, Source

NVML_H = "nvml.h (NVML 13.3.29, NVIDIA/go-nvml gen/nvml/nvml.h)"
DCGM = "DCGM 4.6 modules/health/DcgmHealthWatch.cpp"
HEALTH_TESTS = ("tests/checks/gpu_health/test_gpu_health.py",)
SURFACE = "tests/checks/gpu_health/test_nvml_surface.py"
SURFACE_TESTS = (SURFACE, "tests/cluster/test_shared_nodes.py")
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
        "nvmlDeviceGetCurrentClocksEventReasons (older: nvmlDeviceGetCurrentClocksThrottleReasons), fields 269-271",
        "the clock-event reasons, sampled again after one second with the slowdowns' cumulative durations",
        (clock.CLOCKS_SLOWDOWN,),
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
        f"{DCGM} MonitorNVLinkStatus: a Down link FAILs, none of a MIG GPU's, where NVSwitches wire every link; "
        "PCIe cards against their peers of the same product (HPE-Japan-Presales/e-learning gpu/h100/"
        "mgmt_gpu_on_dl380agen11.md: a bridged H100 PCIe pair, 12 of 18 links active; NVIDIA/NVSentinel#1481: "
        "all links of a PCIe card without a bridge are inactive)",
        (*SURFACE_TESTS, "tests/checks/gpu_health/test_pcie_bridges.py"),
        key="nvlink",
    ),
    _nvml(
        "nvmlDeviceGetNvLinkErrorCounter; field 214 (NVLink5 failed recoveries)",
        "each link's replay, recovery, CRC and ECC counters, read again after one second where not zero",
        (fabric.NVLINK_ERRORS,),
        f"{DCGM} MonitorNVLink4Fields (an error within the window FAILs; CRC at 100/s, DcgmGPUHardwareLimits.h) "
        "and MonitorNVLinkErrorFields (failed recoveries FAIL)",
        (SURFACE,),
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
        (SURFACE,),
        key="inforom",
    ),
    _nvml(
        "nvmlDeviceGetRepairStatus",
        "channel and TPC repairs pending a GPU reset",
        (state.REPAIR_PENDING,),
        f"{NVML_H} nvmlRepairStatus_t (nvidia-ml-py 13.580 and newer)",
        (SURFACE,),
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
        "nvmlDeviceGetComputeRunningProcesses, nvmlDeviceGetGraphicsRunningProcesses, nvmlDeviceGetMemoryInfo, "
        "nvmlDeviceGetComputeMode",
        "who holds each GPU and how much of its memory",
        (),
        "a GPU busy with another job is not a fault (probe.gpu_usage)",
        (*HEALTH_TESTS, *NODE_TESTS),
        qualifies=f"{gpu.PCIE_DEGRADED} (a slow link counts only under load), node.cuda_driver's busy GPUs",
        key="processes",
    ),
    _nvml(
        "nvmlSystemGetDriverVersion, nvmlSystemGetCudaDriverVersion, nvmlDeviceGetName, nvmlDeviceGetUUID, "
        "nvmlDeviceGetPciInfo, nvmlDeviceGetHandleByUUID, nvmlDeviceGetCudaComputeCapability, "
        "nvmlDeviceGetTemperature, nvmlDeviceGetMaxMigDeviceCount, nvmlDeviceGetMigDeviceHandleByIndex",
        "each GPU's identity (name, UUID, PCI address, compute capability, MIG devices), the driver's version, the "
        "temperature beside a slowdown",
        (),
        "names the GPU in every finding by its index, UUID and PCI address; the PCI address ties NVML's GPU to the "
        "kernel log's and the bus's",
        (*HEALTH_TESTS, *NODE_TESTS),
        qualifies="every finding's GPU; gpu.lost (a GPU on the bus that NVML's PCI addresses lack)",
        key="uuid",
    ),
    _nvml(
        "nvmlDeviceGetClockInfo, nvmlDeviceGetPowerUsage, nvmlDeviceGetUtilizationRates",
        "clocks, power draw and utilisation, sampled while envcheck's own benchmarks load a GPU",
        (),
        "figures beside a measurement (perf.*, bench), never a verdict of their own",
        ("tests/perf/test_gpu_state.py",),
        qualifies="perf.* findings' figures (a slow GPU's clocks and power)",
        key="clock",
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
