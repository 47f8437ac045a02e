"""Device-memory bandwidth is measured above L2, flushed, and summarised by the median; every
buffer the bench allocates is counted before it picks a size.

No GPU here: the L2 sizes are the H100's (50 MiB) and H200's (60 MiB) as torch reports them, the
copy is a scripted rate function, and the flush a counter.
"""

from __future__ import annotations

from typing import Any

import pytest

from envcheck.perf.matmul import fitting_sizes, matmul_bytes
from envcheck.perf.memory import MIB, device_copy_bytes, device_copy_figures, device_copy_sizes
from envcheck.perf.unit_run import headline
from envcheck.perf.unit_timing import Timing
from tests.perf.h100 import h100_figure

H100_L2, H200_L2 = 50 * MIB, 60 * MIB


@pytest.mark.parametrize("l2", [H100_L2, H200_L2])
@pytest.mark.parametrize("quick", [True, False])
def test_copy_sizes_are_well_above_l2(l2: int, quick: bool) -> None:
    """The H100 run's 16 MiB copy (L2-resident: 1,896 GB/s ±31%) must not be measured any more."""
    assert h100_figure("memory.d2d.16777216")["timing"]["spread_pct"] > 30
    sizes, notes = device_copy_sizes(quick, l2, 80 << 30)
    assert sizes and notes == []
    assert all(n >= 4 * l2 and n >= 256 * MIB for n in sizes)


def test_a_future_gpu_with_a_huge_l2_still_gets_one_size_above_it() -> None:
    sizes, _ = device_copy_sizes(True, 400 * MIB, 80 << 30)
    assert sizes == [2048 * MIB]


def test_copies_that_do_not_fit_are_left_out_and_named() -> None:
    """A MIG 1g.10gb slice with ~2 GiB free: source + destination + flush buffer must fit."""
    assert device_copy_bytes(1024 * MIB, H100_L2) == 2048 * MIB + 100 * MIB
    sizes, notes = device_copy_sizes(True, H100_L2, 2 << 30)
    assert sizes == [256 * MIB, 512 * MIB]
    assert notes == ["1024 MiB copy left out: needs 2.10 GiB, 2.00 GiB free"]


def test_flush_before_every_repetition_and_median_headline() -> None:
    calls: list[dict[str, Any]] = []
    flush = object()

    def rate(nbytes: int, src: str, dst: str, *, before: Any = None) -> tuple[float, Timing]:
        calls.append({"n": nbytes, "before": before})
        gbps = {256 * MIB: 1480e9, 512 * MIB: 1500e9, 1024 * MIB: 1510e9}[nbytes]
        return gbps, Timing(nbytes / gbps, nbytes / gbps, nbytes / gbps, 0.0, 10)

    figs = device_copy_figures(
        True, 3350.0, l2_bytes=H100_L2, free_bytes=80 << 30, rate=rate, flusher=lambda: flush
    )  # type: ignore[arg-type, return-value]
    assert [c["n"] for c in calls] == [256 * MIB, 512 * MIB, 1024 * MIB]
    assert all(c["before"] is flush for c in calls)
    head = headline(figs)
    assert head["key"] == "memory.d2d.median" and head["value"] == pytest.approx(
        3000.0
    )  # 2 x 1500, not the best
    assert head["pct_of_peak"] == pytest.approx(89.6) and "L2 flushed before each" in head["note"]


def test_matmul_memory_counts_every_buffer() -> None:
    """n=16384 bf16: a, b, out (3 x 512 MiB) + the float32 randn (1 GiB) + flush (100 MiB)."""
    assert matmul_bytes(16384, "bfloat16", H100_L2) == 3 * 512 * MIB + 1024 * MIB + 100 * MIB
    sizes, note = fitting_sizes((4096, 8192, 16384), "float32", H100_L2, 4 << 30)
    assert (
        sizes == [4096, 8192]
        and note is not None
        and note.startswith("left out n=16384: n=16384 needs 4.10 GiB")
    )
