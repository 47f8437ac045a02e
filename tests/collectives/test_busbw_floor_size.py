"""dist.busbw compares a busbw floor only with a sweep row of the message size the floor was measured at.

Azure's floors (460 GB/s on 8x H100, 431 on 8x H200) are 16 GiB all-reduces (`all_reduce_perf -b 16G -e 16G`);
busbw grows with the message size, so the sweep's 1 GiB peak of a healthy node is below them. dist.busbw once
compared that peak with the floor, and every healthy 8-GPU node warned.

What is real and what is staged: `judge` is the real verdict, fed rows shaped as the ranks report them. The rows'
figures are staged (no GPU here): a sweep that stops at 1 GiB with a busbw below 460 at every size, as on a
healthy 8-GPU node, and a sweep that reached 16 GiB. The gloo runs at the end are real ranks on this machine.
"""

from __future__ import annotations

import argparse

import pytest

from envcheck.app.args import message_size
from envcheck.collectives import sweep
from envcheck.core.check import DistOptions
from envcheck.core.result import Status
from tests.helpers import request_of, run_check

MIB, GIB = 1 << 20, 1 << 30
AZURE_H100 = DistOptions(min_busbw_gbps=460.0, min_busbw_at_bytes=16 * GIB)


def findings(rows: list[tuple[int, float]], world: int = 8) -> list[dict[str, object]]:
    """Every rank's sweep findings for (bytes, busbw) rows, as `sweep.sweep` returns them (#wrong 0)."""
    table = [
        {
            "bytes": b,
            "dtype": "float32",
            "time_us": 1.0,
            "algbw_gbps": bw * world / (2 * (world - 1)),
            "busbw_gbps": bw,
            "wrong": 0,
        }
        for b, bw in rows
    ]
    return [{"rank": r, "sweep": table} for r in range(world)]


# STAGED figures: a sweep of 1 MiB .. 1 GiB (the default budget on an 80 GB GPU stops there).
UP_TO_1_GIB = [(MIB << k, 20.0 + 35.0 * k) for k in range(11)]  # peak 370 GB/s at 1 GiB


def test_a_floor_measured_at_16_gib_is_not_judged_against_a_1_gib_sweep() -> None:
    """Fails on the old code: the 370 GB/s peak at 1 GiB was compared with 460 and the node warned."""
    result = sweep.judge(findings(UP_TO_1_GIB), "nccl", 8, AZURE_H100)
    assert result.status is Status.PASS, result.summary
    note = result.measured["floor_not_comparable"]
    assert (
        "460 GB/s floor was measured at 17179869184 B" in note and "largest message is 1073741824 B" in note
    )
    assert "not comparable, not judged" in note and "--memory-fraction" in note
    assert note in result.summary
    assert result.expected["min_busbw_at_bytes"] == 16 * GIB


def test_at_the_floors_size_a_healthy_node_passes_and_a_slow_one_warns() -> None:
    healthy = sweep.judge(findings([*UP_TO_1_GIB, (16 * GIB, 481.0)]), "nccl", 8, AZURE_H100)
    assert healthy.status is Status.PASS and "floor_not_comparable" not in healthy.measured
    slow = sweep.judge(findings([*UP_TO_1_GIB, (16 * GIB, 402.0)]), "nccl", 8, AZURE_H100)
    assert slow.status is Status.WARN and slow.fault_class is not None and slow.fault_class.value == "node"
    assert "at the floor's 17179869184 B message: 402.000 GB/s, below the 460 GB/s floor" in slow.summary
    strict = sweep.judge(
        findings([*UP_TO_1_GIB, (16 * GIB, 402.0)]),
        "nccl",
        8,
        DistOptions(min_busbw_gbps=460.0, min_busbw_at_bytes=16 * GIB, strict_perf=True),
    )
    assert strict.status is Status.FAIL


def test_a_floor_without_a_size_is_still_the_peak_floor() -> None:
    """--min-busbw alone keeps its meaning: the sweep's peak against the floor."""
    result = sweep.judge(findings(UP_TO_1_GIB), "nccl", 8, DistOptions(min_busbw_gbps=460.0))
    assert result.status is Status.WARN and "below the 460 GB/s floor" in result.summary


def test_the_floors_size_is_swept_when_the_memory_budget_allows() -> None:
    free = 79 * GIB  # an 80 GB GPU, idle
    assert sweep.gpu_sizes(free, 0.1, 16 * GIB)[-1] == GIB  # 10 % of 79 GiB: 16 GiB does not fit the budget
    sizes = sweep.gpu_sizes(free, 0.25, 16 * GIB)
    assert (
        sizes[-1] == 16 * GIB and sizes[-2] == GIB
    )  # the doubling still stops at GPU_MAX_TOP, then the floor's size
    assert sweep.gpu_sizes(free, 0.25, None) == sweep.gpu_sizes(free, 0.25)
    assert sweep.gpu_sizes(20 * GIB, 1.0, 16 * GIB)[-1] == 16 * GIB
    tight = 16 * GIB + 256 * MIB  # within the budget, but not with the verification's and NCCL's own buffers
    assert sweep.gpu_sizes(tight, 1.0, 16 * GIB)[-1] == GIB
    assert sweep.gpu_sizes(512 * MIB, 1.0, 16 * GIB) == ()  # nothing fits: still nothing


def test_the_profile_floor_carries_its_size_and_flags_override_it() -> None:
    from envcheck.app.cluster_mode import Mode
    from envcheck.app.run_command import run_context

    def dist(*argv: str) -> DistOptions:
        request = request_of("run", *argv)
        return run_context(request, Mode.of(request)).options.dist

    # The profile's floor applies only with --profile-floors (absolute floors are opt-in); it keeps its size.
    assert dist("--profile", "h100-sxm-8").min_busbw_gbps is None
    floors = dist("--profile", "h100-sxm-8", "--profile-floors")
    assert (floors.min_busbw_gbps, floors.min_busbw_at_bytes) == (460.0, 16 * GIB)
    assert dist("--profile", "h200-8").min_busbw_at_bytes == 16 * GIB
    assert dist("--profile", "a100-sxm-8").min_busbw_at_bytes == 8 * GIB
    replaced = dist("--profile", "h100-sxm-8", "--min-busbw", "300")
    assert (replaced.min_busbw_gbps, replaced.min_busbw_at_bytes) == (300.0, None)  # a new floor: the peak
    resized = dist("--profile", "h100-sxm-8", "--profile-floors", "--min-busbw-at", "1G")
    assert (resized.min_busbw_gbps, resized.min_busbw_at_bytes) == (460.0, GIB)


@pytest.mark.parametrize(
    ("text", "value"),
    [("16G", 16 * GIB), ("16GiB", 16 * GIB), ("512M", 512 * MIB), ("1048576", MIB), ("64k", 64 * 1024)],
)
def test_message_sizes_read_like_nccl_tests(text: str, value: int) -> None:
    assert message_size(text) == value


@pytest.mark.parametrize("text", ["16X", "", "G", "-4", "6", "2T"])
def test_a_bad_message_size_is_one_line(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as caught:
        message_size(text)
    assert "\n" not in str(caught.value)


def test_real_gloo_sweep_compares_like_with_like() -> None:
    """Real gloo ranks: a floor at 1 MiB (a size the CPU sweep has) is judged there; one at 16 GiB is not."""
    judged = run_check("dist.busbw", cpu_ranks=2, min_busbw_gbps=1e6, min_busbw_at_bytes=MIB)
    assert judged.status is Status.WARN and "at the floor's 1048576 B message" in judged.summary
    noted = run_check("dist.busbw", cpu_ranks=2, min_busbw_gbps=1e6, min_busbw_at_bytes=16 * GIB)
    assert noted.status is Status.PASS
    assert "a CPU (gloo) sweep stops at 16 MiB" in noted.measured["floor_not_comparable"]
