"""Reductions along the rows of a float32 matrix: sum, maximum and 2-norm of each row, one output vector. Memory
bound: its throughput is the bytes read (three passes) per second. The reference reduces the same numbers in
float64."""

from __future__ import annotations

from typing import Any

from envcheck.burn.workload import Device, Workload, generator, randn

SHAPE = {"cuda": (16384, 16384), "cpu": (256, 4096)}
TOLERANCE = 1e-5
PASSES = 3


def _run(x: Any) -> Any:
    import torch

    return torch.cat([x.sum(dim=1), x.amax(dim=1), torch.linalg.vector_norm(x, dim=1)])


def workloads() -> list[Workload]:
    """The row reductions in float32."""
    name = "reduce.float32"

    def make(device: Device, seed: int) -> Any:
        return randn(SHAPE[device.kind], generator(name, seed), device)

    return [
        Workload(
            name=name,
            unit="GB/s",
            tolerance=TOLERANCE,
            inputs=make,
            run=_run,
            work=lambda x: float(PASSES * x.numel() * x.element_size()),
            reference=lambda x: _run(x.double()),
        )
    ]
