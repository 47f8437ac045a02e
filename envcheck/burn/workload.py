"""What every burn workload supplies, and what the machinery does with each output: its digest and its error.

A workload is data plus four functions (nccl-tests' shape: each collective supplies only what differs): its inputs
for a seed, the call, the work one call does (FLOPs or bytes) and its float64 reference. Inputs are drawn on the
CPU from a generator seeded by (workload, seed), then moved to the device: every machine, GPU or not, burns the
same numbers, so a checksum means the same thing across a fleet.

The digest is exact integer arithmetic over the output's bits (16-bit words, their sum and a position-weighted
sum, accumulated in int64 without overflow for outputs up to 2**30 words): any single flipped bit changes it, it
costs one pass over the output on the device, and only 16 bytes cross to the host.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Tensor = Any  # torch is imported lazily; mypy does not see it
COLUMNS = 256  # the digest's row width: the weighted sum weights each 16-bit word by its row and its column


@dataclass(frozen=True)
class Device:
    """Where a worker computes: `kind` 'cuda' or 'cpu', torch's device string, and its compute capability."""

    kind: str
    torch_device: str
    capability: tuple[int, int] | None = None


@dataclass(frozen=True)
class Workload:
    """One burn workload: `name` ('matmul.bfloat16'), the unit of its throughput, the relative error allowed
    against the float64 reference (0: exact, a collective), and its functions."""

    name: str
    unit: str  # 'TFLOP/s' or 'GB/s'
    tolerance: float
    inputs: Callable[[Device, int], Any]  # (device, seed) -> the inputs on the device
    run: Callable[[Any], Tensor]  # inputs -> output
    work: Callable[[Any], float]  # inputs -> FLOPs or bytes of one call
    reference: Callable[[Any], Tensor]  # inputs -> the float64 reference (or the exact expected output)
    supported: Callable[[Device], str | None] = lambda device: None  # why not on this device, or None

    @property
    def kind(self) -> str:
        """The family: 'matmul', 'sdpa', 'conv', 'reduce', 'all_reduce'."""
        return self.name.split(".", 1)[0]


def generator(name: str, seed: int) -> Any:
    """A CPU generator for `name`'s inputs of `seed`: the same numbers on every machine."""
    import torch

    return torch.Generator().manual_seed(zlib.crc32(name.encode()) * 1000 + seed)


def randn(shape: tuple[int, ...], gen: Any, device: Device, dtype: Any = None, scale: float = 1.0) -> Tensor:
    """Normal float32 numbers drawn on the CPU, scaled, cast to `dtype` and moved to the device."""
    import torch

    values = torch.randn(shape, generator=gen, dtype=torch.float32)
    if scale != 1.0:
        values *= scale
    return values.to(device=device.torch_device, dtype=dtype or torch.float32)


def digest(output: Tensor) -> str:
    """32 hex digits: the sum and the position-weighted sum of `output`'s 16-bit words, in exact integers."""
    import torch
    import torch.nn.functional as F

    flat = output.detach().contiguous().reshape(-1)
    if flat.element_size() % 2:  # an 8-bit output: widen without changing any bit's meaning
        flat = flat.view(torch.uint8).to(torch.int16)
    words = flat.view(torch.int16).to(torch.int32) & 0xFFFF
    pad = (-words.numel()) % COLUMNS
    grid = (F.pad(words, (0, pad)) if pad else words).view(-1, COLUMNS)
    rows = torch.arange(1, grid.shape[0] + 1, device=grid.device, dtype=torch.int64)
    cols = torch.arange(1, COLUMNS + 1, device=grid.device, dtype=torch.int64)
    plain = grid.sum(dtype=torch.int64)
    weighted = (grid.sum(1, dtype=torch.int64) * rows).sum() + (grid.sum(0, dtype=torch.int64) * cols).sum()
    pair = torch.stack([plain, weighted]).tolist()
    return f"{pair[0] & (2**64 - 1):016x}{pair[1] & (2**64 - 1):016x}"


def relative_error(output: Tensor, reference: Tensor) -> float:
    """||output - reference|| / ||reference|| in float64 (the Frobenius norm; a non-finite output is inf)."""
    import torch

    got = output.detach().to(torch.float64)
    if not bool(torch.isfinite(got).all()):
        return float("inf")
    norm = float(torch.linalg.vector_norm(reference))
    diff = float(torch.linalg.vector_norm(got - reference))
    return diff / norm if norm > 0 else (0.0 if diff == 0 else float("inf"))


def needs_capability(major: int, minor: int, what: str, cpu: bool = False) -> Callable[[Device], str | None]:
    """`supported` for a feature of CUDA compute capability major.minor and newer (on a CPU too where `cpu`)."""

    def check(device: Device) -> str | None:
        if device.kind != "cuda":
            return None if cpu else f"{what} is a CUDA feature"
        if device.capability is None or device.capability < (major, minor):
            have = ".".join(map(str, device.capability)) if device.capability else "unknown"
            return f"{what} needs compute capability {major}.{minor} or newer (this GPU: {have})"
        return None

    return check


def float32_and_bfloat16(
    family: str,
    what: str,
    tolerance: dict[str, float],
    inputs: Callable[[str, str, Device, int], Any],
    run: Callable[[Any], Any],
    work: Callable[[Any], float],
    reference: Callable[[Any], Any],
) -> list[Workload]:
    """One op as two workloads, `family.float32` and `family.bfloat16` (the latter from compute capability 8.0, and
    on a CPU): `inputs(name, dtype_name, device, seed)` makes each one's inputs."""

    def one(dtype_name: str) -> Workload:
        name = f"{family}.{dtype_name}"
        return Workload(
            name=name,
            unit="TFLOP/s",
            tolerance=tolerance[dtype_name],
            inputs=lambda device, seed: inputs(name, dtype_name, device, seed),
            run=run,
            work=work,
            reference=reference,
            supported=(
                needs_capability(8, 0, f"bfloat16 {what}", cpu=True)
                if dtype_name == "bfloat16"
                else lambda device: None
            ),
        )

    return [one("float32"), one("bfloat16")]
