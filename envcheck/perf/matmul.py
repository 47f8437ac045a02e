"""Matmul throughput (FLOP/s) by dtype and size, against the GPU's datasheet peak."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from envcheck.perf.figures import figure
from envcheck.perf.unit_timing import Timing, measure

GPU_DTYPES = ("float32", "tf32", "bfloat16", "float16")


def tf32_override(
    device: str = "cuda", env: Mapping[str, str] | None = None, mode: Callable[[str, bool], str] | None = None
) -> tuple[str | None, str]:
    """(swap, cause): whether float32 and TF32 matmuls on `device` really compute what their names say.

    Measured, not read from the variables (`matmul_precision`): swap is "float32_is_tf32" when a float32
    matmul with allow_tf32=False ran as TF32 (TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 with a torch that honours
    it), "tf32_is_float32" when allowing TF32 still gave full float32 (NVIDIA_TF32_OVERRIDE=0, or a GPU
    without TF32), else None. `cause` names the variable that explains it, or says it was measured.
    """
    from envcheck.reference.matmul_precision import env_cause, matmul_mode

    probe = mode or (lambda dev, allow: matmul_mode(dev, allow_tf32=allow))
    cause = env_cause(env) or "measured"
    if probe(device, False) == "tf32":
        return "float32_is_tf32", cause
    if probe(device, True) == "float32":
        return "tf32_is_float32", cause
    return None, cause


def matmul_names(
    dtype_name: str, n: int, peaks: dict[str, float] | None, override: str | None, cause: str = "measured"
) -> tuple[str, str, float | None]:
    """(key, label, peak) of one matmul figure; a float32 run as TF32 (or the reverse) is never shown
    under the other's name nor against the other's peak."""
    peaks = peaks or {}
    if dtype_name == "float32" and override == "float32_is_tf32":
        return f"matmul.float32_as_tf32.n{n}", f"matmul float32 (ran as TF32: {cause})", peaks.get("tf32")
    if dtype_name == "tf32" and override == "tf32_is_float32":
        return f"matmul.tf32_as_float32.n{n}", f"matmul tf32 (ran as float32: {cause})", peaks.get("float32")
    return f"matmul.{dtype_name}.n{n}", f"matmul {dtype_name}", peaks.get(dtype_name)


GPU_SIZES = {"quick": (1024, 4096, 8192), "full": (512, 1024, 2048, 4096, 8192, 16384)}
CPU_SIZES = {"quick": (256, 512, 1024), "full": (256, 512, 1024, 2048)}


def l2_bytes(device: str) -> int:
    """The GPU's L2 size as torch reports it (64 MiB when it does not)."""
    import torch

    return int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 64 << 20)


def l2_flusher(device: str) -> Callable[[], object] | None:
    """A function that evicts the GPU's L2 (writes a buffer twice its size); None on CPU."""
    if not device.startswith("cuda"):
        return None
    import torch

    scratch = torch.empty(2 * l2_bytes(device), dtype=torch.uint8, device=device)
    return lambda: scratch.zero_()


def matmul_rate(
    n: int,
    dtype_name: str,
    device: str,
    *,
    budget_s: float = 0.5,
    min_reps: int = 5,
    max_reps: int = 50,
    before: Callable[[], object] | None = None,
) -> tuple[float, Timing]:
    """FLOP/s of an n×n @ n×n matmul (2n³ flops) in `dtype_name`, and its timing."""
    import torch

    cuda = device.startswith("cuda")
    dtype = torch.float32 if dtype_name == "tf32" else getattr(torch, dtype_name)
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    out = torch.empty(n, n, device=device, dtype=dtype)
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = dtype_name == "tf32"
    try:
        timing = measure(
            lambda: torch.matmul(a, b, out=out),
            cuda=cuda,
            budget_s=budget_s,
            min_reps=min_reps,
            max_reps=max_reps,
            before=before,
        )
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    return 2.0 * n**3 / timing.median_s, timing


ITEMSIZE = {"float32": 4, "tf32": 4, "bfloat16": 2, "float16": 2}


def matmul_bytes(n: int, dtype_name: str, l2: int) -> int:
    """Device memory one n×n matmul measurement allocates: a, b and out in the dtype, the float32
    randn each input is made from, and the L2 flush buffer (2x L2)."""
    return 3 * n * n * ITEMSIZE[dtype_name] + 4 * n * n + 2 * l2


def gpu_matmul_figures(
    quick: bool, peaks: dict[str, float] | None, free_bytes: int | None = None
) -> list[dict[str, Any]]:
    """TFLOP/s for every GPU dtype and size that fits in free memory, with % of the datasheet peak."""
    import torch

    flush = l2_flusher("cuda")
    l2 = l2_bytes("cuda")
    free = int(torch.cuda.mem_get_info()[0]) if free_bytes is None else free_bytes
    override, cause = tf32_override("cuda")
    figures = []
    for dtype_name in GPU_DTYPES:
        sizes, left_out = fitting_sizes(GPU_SIZES["quick" if quick else "full"], dtype_name, l2, free)
        for n in sizes:
            rate, timing = matmul_rate(n, dtype_name, "cuda", budget_s=0.3 if quick else 1.0, before=flush)
            key, name, peak = matmul_names(dtype_name, n, peaks, override, cause)
            figures.append(
                figure(
                    key,
                    rate / 1e12,
                    "TFLOP/s",
                    peak=peak,
                    timing=timing,
                    label=f"{name} {n}x{n}",
                    series=name,
                    x=n,
                    note=left_out if n == sizes[-1] else None,
                )
            )
    return figures


def fitting_sizes(
    sizes: tuple[int, ...], dtype_name: str, l2: int, free: int
) -> tuple[list[int], str | None]:
    """The sizes whose matmul fits in 80% of `free` bytes, and a note naming those left out."""
    kept = [n for n in sizes if matmul_bytes(n, dtype_name, l2) <= 0.8 * free]
    out = [n for n in sizes if n not in kept]
    if not out:
        return kept, None
    need = matmul_bytes(out[0], dtype_name, l2)
    return kept, (
        f"left out n={', '.join(map(str, out))}: n={out[0]} needs {need / 2**30:.2f} GiB, "
        f"{free / 2**30:.2f} GiB free"
    )


def cpu_matmul_figures(quick: bool) -> list[dict[str, Any]]:
    """GFLOP/s of float32 matmul on the CPU (no peak table for CPUs)."""
    import torch

    figures = []
    for n in CPU_SIZES["quick" if quick else "full"]:
        rate, timing = matmul_rate(n, "float32", "cpu", budget_s=0.6 if quick else 2.0, min_reps=5)
        figures.append(
            figure(
                f"cpu_matmul.float32.n{n}",
                rate / 1e9,
                "GFLOP/s",
                timing=timing,
                label=f"cpu matmul float32 {n}x{n}",
                series="cpu matmul float32",
                x=n,
                note=f"{torch.get_num_threads()} threads",
            )
        )
    return figures
