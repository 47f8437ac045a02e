"""Memory bandwidth: device-to-device copy against the HBM/GDDR peak, host<->device copies against
the PCIe link, and (on CPU-only hosts) a host RAM copy.

A device copy reads and writes every byte, so its bandwidth counts 2 × bytes (the usual
convention of bandwidth tests); a host<->device copy counts the bytes once.
"""

from __future__ import annotations

from typing import Any

from envcheck.bench.figures import figure
from envcheck.bench.timing import Timing, measure

MIB = 1 << 20
DEVICE_SIZES = {"quick": (16 * MIB, 256 * MIB, 1024 * MIB), "full": tuple(MIB << k for k in range(0, 12, 1))}
HOST_SIZES = {"quick": (MIB, 16 * MIB, 256 * MIB), "full": tuple((64 << 10) << k for k in range(0, 15))}
CPU_SIZES = {"quick": (4 * MIB, 64 * MIB, 256 * MIB), "full": (MIB, 4 * MIB, 16 * MIB, 64 * MIB, 256 * MIB)}


def copy_rate(nbytes: int, src_device: str, dst_device: str, *, pinned: bool = False,
              budget_s: float = 0.3) -> tuple[float, Timing]:
    """Bytes/s of `dst.copy_(src)` for an `nbytes` buffer, and its timing."""
    import torch

    src = torch.ones(nbytes, dtype=torch.uint8, device=src_device, pin_memory=pinned and src_device == "cpu")
    dst = torch.empty(nbytes, dtype=torch.uint8, device=dst_device, pin_memory=pinned and dst_device == "cpu")
    cuda = "cuda" in (src_device + dst_device)
    timing = measure(lambda: dst.copy_(src, non_blocking=pinned), cuda=cuda, budget_s=budget_s, min_reps=5)
    return nbytes / timing.median_s, timing


def device_copy_figures(quick: bool, peak_gbps: float | None) -> list[dict[str, Any]]:
    """Device-to-device copy bandwidth (read + write) per size, against the memory peak."""
    figures = []
    for nbytes in DEVICE_SIZES["quick" if quick else "full"]:
        rate, timing = copy_rate(nbytes, "cuda", "cuda")
        figures.append(figure(
            f"memory.d2d.{nbytes}", 2 * rate / 1e9, "GB/s", peak=peak_gbps, timing=timing,
            label=f"device copy {nbytes // MIB} MiB", series="device-to-device", x=nbytes,
        ))
    return figures


def host_copy_figures(quick: bool, pcie_gbps: float | None) -> list[dict[str, Any]]:
    """Host-to-device and device-to-host bandwidth, pinned and pageable, against the PCIe link."""
    figures = []
    for name, src, dst in (("h2d", "cpu", "cuda"), ("d2h", "cuda", "cpu")):
        for pinned in (True, False):
            kind = "pinned" if pinned else "pageable"
            for nbytes in HOST_SIZES["quick" if quick else "full"]:
                rate, timing = copy_rate(nbytes, src, dst, pinned=pinned)
                figures.append(figure(
                    f"memory.{name}.{kind}.{nbytes}", rate / 1e9, "GB/s", peak=pcie_gbps, timing=timing,
                    label=f"{name.upper()} {kind} {nbytes / MIB:g} MiB", series=f"{name.upper()} {kind}", x=nbytes,
                ))
    return figures


def cpu_copy_figures(quick: bool) -> list[dict[str, Any]]:
    """Host RAM copy bandwidth (read + write) per size; no peak is known for host memory."""
    figures = []
    for nbytes in CPU_SIZES["quick" if quick else "full"]:
        rate, timing = copy_rate(nbytes, "cpu", "cpu", budget_s=0.3)
        figures.append(figure(
            f"cpu_memory.copy.{nbytes}", 2 * rate / 1e9, "GB/s", timing=timing,
            label=f"host RAM copy {nbytes // MIB} MiB", series="host RAM copy", x=nbytes,
        ))
    return figures


def pcie_link(handle: Any) -> dict[str, Any]:
    """The PCIe link NVML reports (max generation and width, and the current ones)."""
    import pynvml

    out: dict[str, Any] = {}
    for key, getter in (("max_gen", "nvmlDeviceGetMaxPcieLinkGeneration"),
                        ("max_width", "nvmlDeviceGetMaxPcieLinkWidth"),
                        ("curr_gen", "nvmlDeviceGetCurrPcieLinkGeneration"),
                        ("curr_width", "nvmlDeviceGetCurrPcieLinkWidth")):
        try:
            out[key] = int(getattr(pynvml, getter)(handle))
        except Exception:
            out[key] = None
    return out
