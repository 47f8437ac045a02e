"""Matrix multiplies in every dtype the device supports: float32, TF32 (float32 inputs on the tensor cores),
bfloat16, float16 and FP8 e4m3 (torch._scaled_mm, where torch has it). Square n x n @ n x n, 2n^3 FLOPs.

Tolerances are the relative Frobenius error against the float64 product of the same (already rounded) inputs:
the output's rounding (bfloat16 keeps 8 bits, float16 11) or TF32's rounding of the inputs to 10 bits, with room;
a kernel that is wrong for every GPU alike is far outside them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from envcheck.burn.workload import Device, Workload, generator, needs_capability, randn

# n per device kind. A CPU without bfloat16/float16 instructions runs those dtypes ~50x slower than float32, so they
# get a smaller n there, to keep a round short.
SIZE = {"cuda": 8192, "cpu": 256}
HALF_SIZE = {"cuda": 8192, "cpu": 128}
TOLERANCE = {"float32": 1e-4, "tf32": 5e-3, "bfloat16": 1e-2, "float16": 2e-3, "float8_e4m3fn": 1e-2}


@contextlib.contextmanager
def _tf32(on: bool) -> Iterator[None]:
    import torch

    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = on
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old


def _inputs(name: str, dtype_name: str, device: Device, seed: int) -> tuple[Any, Any]:
    import torch

    n = (HALF_SIZE if dtype_name in ("bfloat16", "float16") else SIZE)[device.kind]
    gen = generator(name, seed)
    dtype = torch.float32 if dtype_name == "tf32" else getattr(torch, dtype_name)
    return randn((n, n), gen, device, dtype), randn((n, n), gen, device, dtype)


def _plain(dtype_name: str) -> Workload:
    name = f"matmul.{dtype_name}"

    def run(ab: tuple[Any, Any]) -> Any:
        with _tf32(dtype_name == "tf32"):
            return ab[0] @ ab[1]

    return Workload(
        name=name,
        unit="TFLOP/s",
        tolerance=TOLERANCE[dtype_name],
        inputs=lambda device, seed: _inputs(name, dtype_name, device, seed),
        run=run,
        work=lambda ab: 2.0 * ab[0].shape[0] * ab[0].shape[1] * ab[1].shape[1],
        reference=lambda ab: ab[0].double() @ ab[1].double(),
        supported=(
            needs_capability(8, 0, "TF32")
            if dtype_name == "tf32"
            else needs_capability(8, 0, "bfloat16 matmul", cpu=True)
            if dtype_name == "bfloat16"
            else lambda device: None
        ),
    )


def _fp8_inputs(name: str, device: Device, seed: int) -> dict[str, Any]:
    import torch

    a, b = _inputs(name, "float32", device, seed)
    one = torch.ones((), device=device.torch_device, dtype=torch.float32)
    fp8 = torch.float8_e4m3fn
    # _scaled_mm wants its second operand column-major
    return {"a": a.to(fp8), "b": b.to(fp8).t().contiguous().t(), "scale": one}


def _fp8_supported(device: Device) -> str | None:
    import torch

    if not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
        return f"torch {torch.__version__} has no FP8 matmul (torch._scaled_mm)"
    return needs_capability(8, 9, "FP8 matmul", cpu=True)(device)


def _fp8() -> Workload:
    name = "matmul.float8_e4m3fn"

    def run(x: dict[str, Any]) -> Any:
        import torch

        return torch._scaled_mm(
            x["a"], x["b"], scale_a=x["scale"], scale_b=x["scale"], out_dtype=torch.bfloat16
        )

    return Workload(
        name=name,
        unit="TFLOP/s",
        tolerance=TOLERANCE["float8_e4m3fn"],
        inputs=lambda device, seed: _fp8_inputs(name, device, seed),
        run=run,
        work=lambda x: 2.0 * x["a"].shape[0] * x["a"].shape[1] * x["b"].shape[1],
        reference=lambda x: x["a"].double() @ x["b"].double(),
        supported=_fp8_supported,
    )


def workloads() -> list[Workload]:
    """The matmuls, float32 first."""
    return [*(_plain(d) for d in ("float32", "tf32", "bfloat16", "float16")), _fp8()]
