"""The finding-code rows of what NVML says of a GPU beyond its presence: memory, PCIe link, clock slowdowns, the NVLink
fabric and links, the driver's recovery action, a vGPU's licence, InfoROM, pending repairs."""

from __future__ import annotations

from envcheck.checks.gpu_health import clock_findings as clock
from envcheck.checks.gpu_health import fabric_findings as fabric
from envcheck.checks.gpu_health import gpu_findings as gpu
from envcheck.checks.gpu_health import state_findings as state
from envcheck.cluster.finding_codes.common_fixes import NODE
from envcheck.core.findings import Code

ROWS: tuple[Code, ...] = (
    Code(
        gpu.ECC_UNCORRECTABLE,
        "uncorrectable ECC errors since the driver loaded (NVML's volatile count)",
        NODE,
        "drain; nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER -i <i>; nvidia-smi -r -i <i>; RMA if they recur",
    ),
    Code(
        gpu.ROW_REMAP_FAILED,
        "row remapping failed: no spare memory rows left (NVML's remapped rows)",
        NODE,
        "drain and RMA the GPU",
    ),
    Code(
        gpu.ROW_REMAP_PENDING,
        "a memory row remap waits for the next GPU reset (NVML's remapped rows)",
        NODE,
        "drain, then nvidia-smi -r -i <i> or reboot",
    ),
    Code(
        gpu.RETIREMENT_PENDING,
        "memory pages wait for retirement at the next GPU reset or driver reload (NVML)",
        NODE,
        "drain, then nvidia-smi -r -i <i> or reboot",
    ),
    Code(
        gpu.PCIE_DEGRADED,
        "the GPU's PCIe link runs narrower than its maximum, or slower while the GPU is busy (NVML)",
        NODE,
        "reseat the GPU and its riser; lspci -vv -s <pci> | grep -E 'LnkCap|LnkSta'",
    ),
    Code(
        clock.CLOCKS_SLOWDOWN,
        "clocks held down by a thermal, power-brake or HW slowdown through a second sample (NVML's clock events "
        "and their cumulative durations): a warning",
        NODE,
        "check cooling and power delivery (nvidia-smi -q -d TEMPERATURE,POWER,PERFORMANCE -i <i>)",
    ),
    Code(
        fabric.FABRIC_NOT_STARTED,
        "the GPU's NVLink fabric registration has not started (NVML fabric state): no NVLink peer-to-peer",
        NODE,
        fabric.FM_FIX,
    ),
    Code(
        fabric.FABRIC_IN_PROGRESS,
        "the GPU's NVLink fabric registration is still in progress (NVML fabric state): a warning",
        NODE,
        fabric.FM_FIX,
    ),
    Code(
        fabric.FABRIC_FAILED,
        "the GPU's NVLink fabric registration completed with an error status (NVML)",
        NODE,
        fabric.FABRIC_FIX,
    ),
    Code(
        fabric.FABRIC_DEGRADED,
        "the GPU's NVLink fabric health reports degraded bandwidth, an unhealthy route, a recovery in progress or an "
        "incorrect configuration (NVML's health mask and summary)",
        NODE,
        fabric.FABRIC_FIX,
    ),
    Code(
        fabric.NVLINK_DOWN,
        "NVLinks of the GPU are down, below its own link count (NVML), where the node's NVLinks are wired",
        NODE,
        fabric.LINK_FIX.replace("{i}", "<i>"),
    ),
    Code(
        fabric.NVLINK_ERRORS,
        "NVLink replay or recovery errors within the sample window, CRC errors at 100/s or more, or failed link "
        "recoveries (fail); counts with no new error in the window (warn)",
        NODE,
        fabric.LINK_FIX.replace("{i}", "<i>"),
    ),
    Code(
        state.RECOVERY_ACTION,
        "NVML's recovery action for the GPU asks for a reset, a reboot or a drain",
        NODE,
        "do what the action says: nvidia-smi -r -i <i>, or reboot the node; drain first",
    ),
    Code(
        state.VGPU_UNLICENSED,
        "a vGPU guest's licensable feature is enabled but not licensed (NVML): compute degrades after 20 minutes",
        NODE,
        "license the VM (NVIDIA License System client token, nvidia-gridd)",
    ),
    Code(
        state.INFOROM_CORRUPT,
        "NVML says the GPU's InfoROM is corrupted: a warning",
        NODE,
        "nvidia-smi -q -d INFOROM -i <i>; reflash the InfoROM; RMA if it recurs",
    ),
    Code(
        state.REPAIR_PENDING,
        "a channel or TPC repair waits for the next GPU reset (NVML)",
        NODE,
        "drain, then nvidia-smi -r -i <i>",
    ),
)
