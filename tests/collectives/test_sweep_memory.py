"""The GPU sweep's sizes fit the memory they really use (arithmetic only; the sizes are picked on GPUs)."""

from __future__ import annotations

import pytest
import torch

from envcheck.collectives import pattern, sweep

MIB = 1 << 20
GIB = 1 << 30


def test_sweep_memory_counts_message_verification_and_nccl() -> None:
    # message (in place) + chunked verification temporaries + NCCL's own buffers
    assert sweep.sweep_memory(GIB) == GIB + pattern.VERIFY_WORKSPACE_BYTES + sweep.NCCL_MARGIN_BYTES
    # six chunk-sized 4-byte tensors at most: int32 index + 2 intermediates, float32 part, expected, mask
    assert pattern.VERIFY_WORKSPACE_BYTES == 6 * 4 * pattern.VERIFY_CHUNK
    assert sweep.NCCL_MARGIN_BYTES >= 256 * MIB


@pytest.mark.parametrize("free_mib", [700, 1024, 2048, 6 * 1024, 24 * 1024, 80 * 1024])
def test_every_size_fits_the_free_memory(free_mib: int) -> None:
    """Old code: 700 MiB free gave a 256 MiB top size (GPU_MIN_TOP overrode the budget)."""
    free = free_mib * MIB
    sizes = sweep.gpu_sizes(free, 0.1)
    assert all(sweep.sweep_memory(s) <= free for s in sizes)
    assert list(sizes) == [MIB << k for k in range(len(sizes))]


def test_sizes_on_an_80_gib_gpu_reach_1_gib() -> None:
    assert sweep.gpu_sizes(80 * GIB, 0.1)[-1] == GIB


def test_too_little_memory_gives_no_sizes() -> None:
    assert sweep.gpu_sizes(256 * MIB, 0.1) == ()


def test_chunked_fill_and_verify_match_the_whole_buffer_pattern() -> None:
    """Verification goes through chunks (bounded temporaries) and still finds a wrong element anywhere."""
    count, world = 1000, 5
    buf = torch.zeros(count)
    total = torch.zeros(count)
    for rank in range(world):
        pattern.fill_exact(buf, rank, chunk=64)
        assert torch.equal(buf, pattern.exact_contribution(rank, count, buf.device))
        total += buf
    assert pattern.count_wrong_exact(total, world, chunk=64) == 0
    total[777] += 1
    assert pattern.count_wrong_exact(total, world, chunk=64) == 1
