"""Which matrix rows run on this host's driver and GPUs, and why not (pure: the driver/CUDA rule is
envcheck.core.cuda_compat's, the GPU arch rule envcheck.checks.cuda.arch's)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from envcheck.core.cuda_compat import MAJOR_FLOOR, below_floor, driver_floor
from envcheck.core.versions import release

# The driver floor per CUDA major (minor-version compatibility) is one table: envcheck.core.cuda_compat.
MINOR_COMPAT_DRIVER = MAJOR_FLOOR


@dataclass
class HostGpus:
    """What the host's driver says, without torch."""

    source: str | None = None  # nvml, nvidia-smi, libcuda; None when no NVIDIA driver answered
    driver: str | None = None
    driver_cuda: str | None = None
    capabilities: list[tuple[int, int]] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    why_none: str = ""
    listed: list[dict[str, Any]] = field(default_factory=list)  # each GPU: name and compute capability


def driver_problem(driver: str | None, driver_cuda: str | None, row_cuda: str) -> str | None:
    """Why a driver cannot run a CUDA `row_cuda` build, or None when it can (possibly via minor compat)."""
    if driver is None:
        return None
    row = release(row_cuda) or (0, 0)
    have = release(driver_cuda) if driver_cuda else None
    if have is not None and have[:2] >= row[:2]:
        return None
    need = driver_floor(row[0])
    if need is None:
        return f"no record of the minimum driver for CUDA {row_cuda}"
    older = below_floor(driver, row[0])
    if older is None:
        return f"driver version {driver!r} is not a version"
    if older:
        supports = f" (supports CUDA {driver_cuda})" if driver_cuda else ""
        return (
            f"driver {driver}{supports} is too old for CUDA {row_cuda}: CUDA {row[0]}.x needs >= {need} "
            "(minor-version compatibility); upgrade the driver or pick a row with an older CUDA"
        )
    return None


def minor_compat_note(driver_cuda: str | None, row_cuda: str) -> str:
    """A note when a row runs only through minor-version compatibility."""
    have = release(driver_cuda) if driver_cuda else None
    row = release(row_cuda) or (0, 0)
    if have is not None and have[:2] < row[:2]:
        return f"runs via minor-version compatibility (driver's CUDA {driver_cuda} < {row_cuda}: no newer PTX JIT)"
    return ""


def arch_problem(capabilities: list[tuple[int, int]], arch_list: list[str] | None) -> str | None:
    """Why some GPU's compute capability is not in a build's arch list, or None when all are covered."""
    from envcheck.checks.cuda.arch import arch_coverage

    if arch_list is None or not capabilities:
        return None
    missing = sorted({cap for cap in capabilities if arch_coverage(cap, arch_list) is None})
    if not missing:
        return None
    sms = ", ".join(f"sm_{a}{b}" for a, b in missing)
    return f"GPU arch {sms} is not in this build's arch list ({' '.join(arch_list)})"


def host_platform(machine: str | None = None) -> str:
    """This host's image platform (linux/amd64, linux/arm64) from the machine name uname gives."""
    import platform

    name = (machine or platform.machine()).lower()
    return {
        "x86_64": "linux/amd64",
        "amd64": "linux/amd64",
        "aarch64": "linux/arm64",
        "arm64": "linux/arm64",
    }.get(name, f"linux/{name}")


def platform_problem(platform: str, row_platforms: tuple[str, ...]) -> str | None:
    """Why a row has no image for this host's platform, or None when it has one."""
    if platform in row_platforms:
        return None
    return f"no {platform} image: this row is built for {', '.join(row_platforms)} only"


def row_verdicts(gpus: HostGpus, rows: list[Any], platform: str = "linux/amd64") -> list[dict[str, Any]]:
    """For each matrix row: runs (True/False, or None when unknown without a GPU), why, and its tags. A row without
    an image for this host's platform does not run here, GPU or not (an arm64 Grace host pulls only arm64 rows)."""
    out: list[dict[str, Any]] = []
    for row in rows:
        problems = [
            p
            for p in (
                driver_problem(gpus.driver, gpus.driver_cuda, row.cuda),
                arch_problem(gpus.capabilities, row.arch_list),
            )
            if p
        ]
        wrong_platform = platform_problem(platform, row.platforms)
        if wrong_platform:
            runs: bool | None = False
            why = wrong_platform
        elif gpus.source is None:
            runs = None
            why = (
                f"needs an NVIDIA driver >= {MINOR_COMPAT_DRIVER.get((release(row.cuda) or (0,))[0], '?')} "
                f"and a GPU in {' '.join(row.arch_list) if row.arch_list else 'an unrecorded arch list'}"
            )
        else:
            runs = not problems
            why = (
                "; ".join(problems)
                or minor_compat_note(gpus.driver_cuda, row.cuda)
                or "driver and GPU arch fit"
            )
        out.append(
            {
                "row": row.id,
                "torch": row.torch,
                "cuda": row.cuda,
                "runs": runs,
                "why": why,
                "arch_list": row.arch_list,
                "platforms": list(row.platforms),
                "tags": [t for target in row.targets for t in row.tags(target)],
            }
        )
    return out
