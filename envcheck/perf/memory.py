"""Memory bandwidth: device-to-device copy against the HBM/GDDR peak, host<->device copies against
the PCIe link, and (on CPU-only hosts) a host RAM copy.

A device copy reads and writes every byte, so its bandwidth counts 2 × bytes (the usual
convention of bandwidth tests); a host<->device copy counts the bytes once. Device copies are
sized well above L2 (at least 4x L2 and 256 MiB: a 16 MiB copy sits in an H100's 50 MB L2), L2 is
flushed before every repetition, and the unit's figure is the median over sizes, not the best.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from envcheck.perf.figures import figure
from envcheck.perf.unit_timing import Timing, measure
from envcheck.probe.nvml_fields import Fields, value

MIB = 1 << 20
DEVICE_SIZES = {"quick": (256 * MIB, 512 * MIB, 1024 * MIB), "full": tuple(MIB << k for k in range(8, 12))}
FREE_SHARE = 0.8  # use at most this share of the free device memory
HOST_SIZES = {"quick": (MIB, 16 * MIB, 256 * MIB), "full": tuple((64 << 10) << k for k in range(0, 15))}
CPU_SIZES = {"quick": (4 * MIB, 64 * MIB, 256 * MIB), "full": (MIB, 4 * MIB, 16 * MIB, 64 * MIB, 256 * MIB)}


def device_copy_sizes(quick: bool, l2_bytes: int, free_bytes: int | None) -> tuple[list[int], list[str]]:
    """Copy sizes at least 4x L2 and 256 MiB that fit in free memory, and notes on the ones left out.

    A copy of n bytes holds n (source) + n (destination) + 2x L2 (the flush buffer).
    """
    floor = max(4 * l2_bytes, 256 * MIB)
    sizes = [n for n in DEVICE_SIZES["quick" if quick else "full"] if n >= floor]
    if not sizes:
        sizes = [1 << (floor - 1).bit_length()]
    kept, notes = [], []
    for n in sizes:
        need = device_copy_bytes(n, l2_bytes)
        if free_bytes is not None and need > FREE_SHARE * free_bytes:
            notes.append(
                f"{n // MIB} MiB copy left out: needs {need / 2**30:.2f} GiB, "
                f"{free_bytes / 2**30:.2f} GiB free"
            )
        else:
            kept.append(n)
    return kept, notes


def device_copy_bytes(nbytes: int, l2_bytes: int) -> int:
    """Device memory one device copy allocates: source, destination and the L2 flush buffer."""
    return 2 * nbytes + 2 * l2_bytes


def copy_rate(
    nbytes: int,
    src_device: str,
    dst_device: str,
    *,
    pinned: bool = False,
    budget_s: float = 0.3,
    before: Callable[[], object] | None = None,
) -> tuple[float, Timing]:
    """Bytes/s of `dst.copy_(src)` for an `nbytes` buffer, and its timing."""
    import torch

    src = torch.ones(nbytes, dtype=torch.uint8, device=src_device, pin_memory=pinned and src_device == "cpu")
    dst = torch.empty(nbytes, dtype=torch.uint8, device=dst_device, pin_memory=pinned and dst_device == "cpu")
    cuda = "cuda" in (src_device + dst_device)
    timing = measure(
        lambda: dst.copy_(src, non_blocking=pinned), cuda=cuda, budget_s=budget_s, min_reps=5, before=before
    )
    return nbytes / timing.median_s, timing


def device_copy_figures(
    quick: bool,
    peak_gbps: float | None,
    *,
    l2_bytes: int | None = None,
    free_bytes: int | None = None,
    rate: Callable[..., tuple[float, Timing]] = copy_rate,
    flusher: Callable[[], Callable[[], object] | None] | None = None,
) -> list[dict[str, Any]]:
    """Device-to-device copy bandwidth (read + write) per size above L2, L2 flushed before every
    repetition, and their median (the unit's figure) against the memory peak.

    `l2_bytes`/`free_bytes` default to what torch reports for the current GPU; tests inject them
    with `rate` and `flusher`.
    """
    from envcheck.perf.matmul import l2_bytes as device_l2
    from envcheck.perf.matmul import l2_flusher

    if l2_bytes is None or free_bytes is None:
        import torch

        l2_bytes = device_l2("cuda") if l2_bytes is None else l2_bytes
        free_bytes = int(torch.cuda.mem_get_info()[0]) if free_bytes is None else free_bytes
    sizes, notes = device_copy_sizes(quick, l2_bytes, free_bytes)
    flush = (flusher or (lambda: l2_flusher("cuda")))()
    figures = []
    for nbytes in sizes:
        measured, timing = rate(nbytes, "cuda", "cuda", before=flush)
        figures.append(
            figure(
                f"memory.d2d.{nbytes}",
                2 * measured / 1e9,
                "GB/s",
                peak=peak_gbps,
                timing=timing,
                label=f"device copy {nbytes // MIB} MiB",
                series="device-to-device",
                x=nbytes,
            )
        )
    if figures:
        median = statistics.median(f["value"] for f in figures)
        note = (
            f"median over {len(figures)} copy sizes >= 4x L2 ({l2_bytes // MIB} MiB), L2 flushed before each"
        )
        figures.insert(
            0,
            figure(
                "memory.d2d.median",
                median,
                "GB/s",
                peak=peak_gbps,
                label="device memory bandwidth",
                note="; ".join([note, *notes]),
            ),
        )
    return figures


def host_copy_figures(quick: bool, pcie_gbps: float | None) -> list[dict[str, Any]]:
    """Host-to-device and device-to-host bandwidth, pinned and pageable, against the PCIe link."""
    figures = []
    for name, src, dst in (("h2d", "cpu", "cuda"), ("d2h", "cuda", "cpu")):
        for pinned in (True, False):
            kind = "pinned" if pinned else "pageable"
            for nbytes in HOST_SIZES["quick" if quick else "full"]:
                rate, timing = copy_rate(nbytes, src, dst, pinned=pinned)
                figures.append(
                    figure(
                        f"memory.{name}.{kind}.{nbytes}",
                        rate / 1e9,
                        "GB/s",
                        peak=pcie_gbps,
                        timing=timing,
                        label=f"{name.upper()} {kind} {nbytes / MIB:g} MiB",
                        series=f"{name.upper()} {kind}",
                        x=nbytes,
                    )
                )
    return figures


def cpu_copy_figures(quick: bool) -> list[dict[str, Any]]:
    """Host RAM copy bandwidth (read + write) per size; no peak is known for host memory."""
    figures = []
    for nbytes in CPU_SIZES["quick" if quick else "full"]:
        rate, timing = copy_rate(nbytes, "cpu", "cpu", budget_s=0.3)
        figures.append(
            figure(
                f"cpu_memory.copy.{nbytes}",
                2 * rate / 1e9,
                "GB/s",
                timing=timing,
                label=f"host RAM copy {nbytes // MIB} MiB",
                series="host RAM copy",
                x=nbytes,
            )
        )
    return figures


def pcie_link(fields: Fields, handle: Any) -> dict[str, int | None]:
    """The PCIe link NVML reports (max generation and width, and the current ones), through the one typed NVML
    reader (inside read_nvml's budget); a field NVML does not give is None."""
    return {
        "max_gen": value(fields.pcie(handle, current=False, width=False)),
        "max_width": value(fields.pcie(handle, current=False, width=True)),
        "curr_gen": value(fields.pcie(handle, current=True, width=False)),
        "curr_width": value(fields.pcie(handle, current=True, width=True)),
    }
