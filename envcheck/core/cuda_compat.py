"""CUDA's driver compatibility rule, in one place: which NVIDIA driver runs a build for CUDA N.x.

A build for CUDA N.x runs on any driver from N's floor (minor-version compatibility: NVIDIA, "Minor Version
Compatibility", table 1: https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html gives
13.x >= 580, 12.x >= 525, 11.x >= 450; the toolkit release notes give the exact 12.x and 11.x floors: "CUDA 11.x:
>= 450.80.02", "CUDA 12.x: >= 525.60.13", "CUDA 13.x: >= 580"). A driver whose own CUDA is older than the build's
minor still runs it that way, but cannot JIT PTX newer than itself. Read by cuda.available's verdict, `envcheck host`
and the image runner's GPU refusals.
"""

from __future__ import annotations

import re

MAJOR_FLOOR = {11: "450.80.02", 12: "525.60.13", 13: "580"}


def cuda_release(text: str) -> tuple[int, int]:
    """'12.8' -> (12, 8); '13' -> (13, 0)."""
    major, _, minor = text.partition(".")
    return int(major), int(minor or 0)


def driver_numbers(text: str) -> tuple[int, ...]:
    """A driver version's numbers: '580.95.05' -> (580, 95, 5); () when it has none."""
    return tuple(int(p) for p in re.findall(r"\d+", text))


def driver_floor(cuda_major: int) -> str | None:
    """The oldest driver that runs every CUDA `cuda_major`.x build, or None when there is no record of it."""
    return MAJOR_FLOOR.get(cuda_major)


def below_floor(driver: str, cuda_major: int) -> bool | None:
    """Whether `driver` is older than CUDA `cuda_major`'s floor; None when the floor or the version is unknown."""
    floor, numbers = driver_floor(cuda_major), driver_numbers(driver)
    if floor is None or not numbers:
        return None
    return numbers < driver_numbers(floor)


def needs_newer_major(driver_cuda: tuple[int, int], build_cuda: tuple[int, int]) -> bool:
    """Whether a build needs a newer CUDA major than the driver's: no driver floor bridges a major."""
    return driver_cuda[0] < build_cuda[0]


def by_minor_compat(driver_cuda: tuple[int, int], build_cuda: tuple[int, int]) -> bool:
    """Whether a build runs only through minor-version compatibility (same major, the driver's minor older)."""
    return driver_cuda[0] == build_cuda[0] and driver_cuda[:2] < build_cuda[:2]
