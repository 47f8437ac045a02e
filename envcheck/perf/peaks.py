"""Datasheet peaks for known GPUs (dense, i.e. without 2:4 sparsity), and name matching.

All figures are per GPU, in TFLOP/s for compute and GB/s (1e9 bytes/s) for memory. Where a
datasheet gives only the sparse figure, the dense one is half of it. `float32` is the CUDA-core
FP32 rate (no tensor cores); `tf32`, `bfloat16` and `float16` are tensor-core rates with FP32
accumulation (what `torch.matmul` uses). An unknown GPU gets no peak: we never guess.

Sources:
- H100 SXM / PCIe / NVL: NVIDIA H100 Tensor Core GPU datasheet
  https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet
  (SXM: FP32 67, TF32 989*, BF16/FP16 1979*, 3.35 TB/s; PCIe: FP32 51, TF32 756*, BF16 1513*, 2.0 TB/s;
  NVL: FP32 60, TF32 835*, BF16 1671*, 3.9 TB/s; * = sparse, halved here)
- H200 SXM / NVL: NVIDIA H200 datasheet https://www.nvidia.com/en-us/data-center/h200/
  (same compute as H100 SXM resp. NVL; 4.8 TB/s)
- A100: NVIDIA A100 datasheet https://www.nvidia.com/en-us/data-center/a100/
  (FP32 19.5, TF32 156, BF16/FP16 312 dense; 80GB SXM 2039 GB/s, 80GB PCIe 1935, 40GB 1555)
- L40S: NVIDIA L40S datasheet https://www.nvidia.com/en-us/data-center/l40s/
  (FP32 91.6, TF32 366*, BF16/FP16 733*, 864 GB/s)
- RTX 4090: NVIDIA Ada GPU architecture whitepaper, appendix table
  https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf
  (FP32 82.6; TF32 82.6; FP16/BF16 with FP32 accumulate 165.2 dense; 1008 GB/s)
- RTX 5090: NVIDIA RTX Blackwell GPU architecture whitepaper, appendix table
  https://images.nvidia.com/aem-dam/Solutions/geforce/blackwell/nvidia-rtx-blackwell-gpu-architecture.pdf
  (FP32 104.8; TF32 104.8; FP16/BF16 with FP32 accumulate 209.5 dense; 1792 GB/s)
- B200 (HGX, 1000 W): NVIDIA HGX B200 datasheet https://www.nvidia.com/en-us/data-center/hgx/
  (8-GPU totals divided by 8: FP32 75, TF32 2.25 PF* , BF16/FP16 4.5 PF*; 8 TB/s)
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class GpuPeak:
    """Datasheet peaks of one GPU model."""

    model: str
    tflops: dict[str, float]  # by dtype: float32, tf32, bfloat16, float16
    mem_gbps: float
    source: str
    sms: int | None = None  # SMs of the full GPU (for MIG slices); None where we have no reliable figure
    mem_gb: float | None = None  # memory of the full GPU, GB as MIG profile names count it


def _peak(
    model: str,
    fp32: float,
    tf32: float,
    half: float,
    mem: float,
    source: str,
    sms: int | None = None,
    mem_gb: float | None = None,
) -> GpuPeak:
    return GpuPeak(
        model, {"float32": fp32, "tf32": tf32, "bfloat16": half, "float16": half}, mem, source, sms, mem_gb
    )


_H100 = "NVIDIA H100 datasheet"
_A100 = "NVIDIA A100 datasheet"

# Ordered: the first pattern that matches the (lower-cased) device name wins, so the more
# specific names (PCIe, NVL, 40GB) come before the general ones.
PEAKS: tuple[tuple[str, GpuPeak], ...] = (
    (r"\bh100\b.*pcie", _peak("H100 PCIe", 51.0, 378.0, 756.0, 2000.0, _H100, 114, 80)),
    (r"\bh100\b.*nvl", _peak("H100 NVL", 60.0, 417.5, 835.5, 3900.0, _H100, 132, 94)),
    (r"\bh100\b", _peak("H100 SXM", 67.0, 494.5, 989.5, 3350.0, _H100, 132, 80)),
    (r"\bh200\b.*nvl", _peak("H200 NVL", 60.0, 417.5, 835.5, 4800.0, "NVIDIA H200 datasheet", 132, 141)),
    (r"\bh200\b", _peak("H200 SXM", 67.0, 494.5, 989.5, 4800.0, "NVIDIA H200 datasheet", 132, 141)),
    (r"a100.*40\s*gb", _peak("A100 40GB", 19.5, 156.0, 312.0, 1555.0, _A100, 108, 40)),
    (
        r"a100.*pcie.*80\s*gb|a100.*80\s*gb.*pcie",
        _peak("A100 80GB PCIe", 19.5, 156.0, 312.0, 1935.0, _A100, 108, 80),
    ),
    (r"a100", _peak("A100 80GB SXM", 19.5, 156.0, 312.0, 2039.0, _A100, 108, 80)),
    (r"\bl40s\b", _peak("L40S", 91.6, 183.0, 366.5, 864.0, "NVIDIA L40S datasheet")),
    (r"rtx 4090\s*$", _peak("RTX 4090", 82.6, 82.6, 165.2, 1008.0, "NVIDIA Ada architecture whitepaper")),
    (r"rtx 5090\s*$", _peak("RTX 5090", 104.8, 104.8, 209.5, 1792.0, "NVIDIA RTX Blackwell whitepaper")),
    (r"\bb200\b", _peak("B200", 75.0, 1125.0, 2250.0, 8000.0, "NVIDIA HGX B200 datasheet")),
)

# PCIe payload bandwidth per lane in GB/s, one direction (after line encoding), by generation.
PCIE_LANE_GBPS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}


# A MIG device's name is the full GPU's name plus the profile, e.g. "NVIDIA A100-SXM4-80GB MIG 1g.10gb".
_MIG = re.compile(r"\bmig\b(?:\s+(\d+)g\.(\d+)gb\b)?")
MEMORY_SLICES = 8  # A100, H100 and H200 split their memory into 8 MIG memory slices


def lookup(device_name: str, sm_count: int | None = None) -> GpuPeak | None:
    """The datasheet peaks for a device name as CUDA/NVML report it, or None when unknown.

    A MIG slice gets per-slice peaks: compute scaled by its SMs (`sm_count`, what torch reports
    as `multi_processor_count`) over the full GPU's, memory bandwidth by its memory slices (its
    memory over the full GPU's, in eighths). Without `sm_count`, for a profile we cannot parse, or a
    GPU whose SM count or memory we do not list, a MIG slice gets None: peak unknown, never the
    full GPU's peak (and the profile's "40gb" never matches another card's name).
    """
    name = device_name.lower()
    mig = _MIG.search(name)
    base = name[: mig.start()] if mig else name
    full = next((peak for pattern, peak in PEAKS if re.search(pattern, base)), None)
    if mig is None or full is None:
        return full
    if not mig.group(1) or sm_count is None or not full.sms or not full.mem_gb:
        return None
    return mig_slice(full, int(mig.group(1)), int(mig.group(2)), sm_count)


def mig_slice(full: GpuPeak, gpcs: int, slice_gb: int, sm_count: int) -> GpuPeak | None:
    """`full`'s peaks scaled to a MIG slice of `gpcs` compute slices, `slice_gb` GB and `sm_count` SMs."""
    assert full.sms and full.mem_gb
    if not 0 < sm_count <= full.sms:
        return None
    eighths = MEMORY_SLICES * slice_gb / full.mem_gb
    slices = round(eighths)
    if not 1 <= slices <= MEMORY_SLICES or abs(eighths - slices) > 0.25:
        return None  # the profile's memory is not a whole number of memory slices: do not guess
    compute = sm_count / full.sms
    return GpuPeak(
        model=f"{full.model} MIG {gpcs}g.{slice_gb}gb ({sm_count}/{full.sms} SMs, {slices}/{MEMORY_SLICES} memory)",
        tflops={dtype: round(value * compute, 1) for dtype, value in full.tflops.items()},
        mem_gbps=round(full.mem_gbps * slices / MEMORY_SLICES, 1),
        source=f"{full.source}, scaled to the MIG slice's SMs and memory slices",
        sms=sm_count,
        mem_gb=float(slice_gb),
    )


def pcie_peak_gbps(generation: int | None, width: int | None) -> float | None:
    """Theoretical one-direction PCIe bandwidth for a link, or None when the link is unknown."""
    if not generation or not width or generation not in PCIE_LANE_GBPS:
        return None
    return round(PCIE_LANE_GBPS[generation] * width, 2)


def pct_of_peak(value: float, peak: float | None) -> float | None:
    """`value` as a percentage of `peak` (None when the peak is unknown)."""
    if peak is None or peak <= 0:
        return None
    return round(100.0 * value / peak, 1)
