"""Peak memory of one call: the CUDA allocator's peak on a GPU, peak RSS growth on a CPU.

On a CPU, torch allocates with malloc, and glibc normally keeps freed blocks for reuse, which
hides the peak. We switch glibc to a fixed mmap threshold (large blocks go straight back to the
kernel) and reset the kernel's high-water mark (`/proc/self/clear_refs`), so VmHWM - VmRSS is the
call's peak. That mallopt change lasts for the process: run this in its own worker group. Before each call,
`malloc_trim` hands free heap pages back, so reusing them shows up as RSS growth again.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import re
import statistics
from collections.abc import Callable
from pathlib import Path

M_MMAP_THRESHOLD = -3


def _status_kib(field: str) -> int:
    match = re.search(rf"^{field}:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.M)
    if match is None:
        raise RuntimeError(f"/proc/self/status has no {field}")
    return int(match.group(1))


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")


def prepare_cpu_accounting() -> None:
    """Make freed large blocks return to the kernel so RSS tracks live memory (glibc only)."""
    if not _libc().mallopt(M_MMAP_THRESHOLD, 64 * 1024):
        raise RuntimeError("mallopt(M_MMAP_THRESHOLD) failed; cannot measure CPU peak memory")


def cpu_peak_bytes(fn: Callable[[], object]) -> int:
    """Peak RSS growth while `fn` runs, in bytes."""
    _libc().malloc_trim(0)  # free heap pages would otherwise be reused without RSS growth
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    before = _status_kib("VmRSS")
    fn()
    return max(0, _status_kib("VmHWM") - before) * 1024


def peak_bytes_during(fn: Callable[[], object], device: str, repeats: int = 3) -> int:
    """Median over `repeats` of the extra memory `fn` needed at its peak on `device`."""
    samples = []
    if device.startswith("cuda"):
        import torch

        for _ in range(repeats):
            torch.cuda.synchronize()
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            fn()
            torch.cuda.synchronize()
            samples.append(torch.cuda.max_memory_allocated() - base)
    else:
        prepare_cpu_accounting()
        fn()  # first call after the switch re-maps the blocks it keeps
        samples = [cpu_peak_bytes(fn) for _ in range(repeats)]
    return int(statistics.median(samples))
