"""How close envcheck's matmul figure comes to a bare, hand-written timing loop.

Both run in this process in alternating rounds (so a busy neighbour slows both alike); the
medians of the rounds are compared. Prints figures; asserts nothing (wall-clock agreement on a
shared machine is a measurement, not a test; tests/perf/test_accuracy.py checks the arithmetic
with a scripted clock). Usage: PYTHONPATH=. python bench/instrument_accuracy.py [--rounds N] [--cpu-threads N]
"""

from __future__ import annotations

import argparse
import statistics
import time

from envcheck.perf.matmul import l2_flusher, matmul_rate


def bare_cpu_gflops(n: int, reps: int) -> float:
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


def bare_cuda_tflops(n: int, reps: int) -> float:
    import torch

    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    flush = l2_flusher("cuda")
    for _ in range(3):
        a @ b
    times = []
    for _ in range(reps):
        if flush is not None:
            flush()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        a @ b
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / 1e3)
    return 2 * n**3 / statistics.median(times) / 1e12


def compare(label: str, unit: str, ours: list[float], bare: list[float]) -> None:
    a, b = statistics.median(ours), statistics.median(bare)
    print(
        f"{label:28s} envcheck {a:9.2f} {unit}  bare loop {b:9.2f} {unit}  "
        f"difference {100 * (a - b) / b:+6.2f}%  (rounds={len(ours)})"
    )


def main() -> None:
    import torch

    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--cpu-threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.cpu_threads)
    ours, bare = [], []
    for _ in range(args.rounds):
        rate, t = matmul_rate(512, "float32", "cpu", budget_s=0.3, min_reps=10, max_reps=40)
        ours.append(rate / 1e9)
        bare.append(bare_cpu_gflops(512, t.reps))
    compare("cpu float32 512", "GFLOP/s", ours, bare)
    if not torch.cuda.is_available():
        print("cuda bfloat16 8192: skipped (no CUDA device visible)")
        return
    ours, bare = [], []
    for _ in range(args.rounds):
        rate, t = matmul_rate(8192, "bfloat16", "cuda", budget_s=0.5, before=l2_flusher("cuda"))
        ours.append(rate / 1e12)
        bare.append(bare_cuda_tflops(8192, t.reps))
    compare("cuda bfloat16 8192", "TFLOP/s", ours, bare)


if __name__ == "__main__":
    main()
