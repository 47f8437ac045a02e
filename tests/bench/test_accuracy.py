"""Accuracy of the instrument: envcheck's matmul figure agrees with a bare, hand-written timing loop.

Both run in this process in alternating rounds (so a busy neighbour slows both alike) and are
compared by their medians; they must agree within 5%.
"""

from __future__ import annotations

import statistics
import time

import pytest

from envcheck.bench.matmul import l2_flusher, matmul_rate

ROUNDS = 7


def _bare_cpu_gflops(n: int, reps: int) -> float:
    import torch

    a, b = torch.randn(n, n), torch.randn(n, n)
    out = torch.empty(n, n)
    torch.matmul(a, b, out=out)
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        torch.matmul(a, b, out=out)
        samples.append(time.perf_counter() - start)
    return 2 * n**3 / statistics.median(samples) / 1e9


def test_cpu_float32_matches_bare_loop() -> None:
    import torch

    torch.set_num_threads(1)  # a 2-core machine shared with other jobs: one thread is stable
    ours, bare = [], []
    for _ in range(ROUNDS):
        rate, timing = matmul_rate(512, "float32", "cpu", budget_s=0.3, min_reps=10, max_reps=40)
        ours.append(rate / 1e9)
        bare.append(_bare_cpu_gflops(512, timing.reps))
    a, b = statistics.median(ours), statistics.median(bare)
    assert abs(a - b) / b < 0.05, f"envcheck {a:.1f} GFLOP/s vs bare loop {b:.1f} GFLOP/s"


def _bare_cuda_tflops(n: int, reps: int) -> float:
    import torch

    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    flush = l2_flusher("cuda")
    assert flush is not None
    for _ in range(3):
        a @ b
    times = []
    for _ in range(reps):
        flush()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        a @ b
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / 1e3)
    return 2 * n**3 / statistics.median(times) / 1e12


@pytest.mark.gpu
def test_gpu_bfloat16_matches_bare_loop() -> None:
    ours, bare = [], []
    for _ in range(ROUNDS):
        rate, timing = matmul_rate(8192, "bfloat16", "cuda", budget_s=0.5, before=l2_flusher("cuda"))
        ours.append(rate / 1e12)
        bare.append(_bare_cuda_tflops(8192, timing.reps))
    a, b = statistics.median(ours), statistics.median(bare)
    assert abs(a - b) / b < 0.05, f"envcheck {a:.1f} TFLOP/s vs bare loop {b:.1f} TFLOP/s"
