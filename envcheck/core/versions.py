"""Versions and requirements through `packaging` (PEP 440 / PEP 508), never by hand.

Wheel metadata writes pins in more than one form: `torch==2.9.1`, `torch (==2.11.0)` (torchvision's), with
extras (`cuda-toolkit[nvcc]==13.0.2`) and markers (`; platform_system == "Linux"`). All of them parse here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

# packaging's requirements and name rules import its markers and platform tags (logging, subprocess, sysconfig:
# most of a command's start-up before its parser exists); only the functions that read requirements need them.
if TYPE_CHECKING:
    from packaging.requirements import Requirement


def parse_version(text: str) -> Version | None:
    """A PEP 440 version, or None when `text` is not one."""
    try:
        return Version(str(text).strip())
    except InvalidVersion:
        return None


def release(text: str) -> tuple[int, ...] | None:
    """The release numbers of a version (`2.13.0+cpu` -> (2, 13, 0)), or None when it is not a version."""
    version = parse_version(text)
    return version.release if version is not None else None


def public(text: str) -> str:
    """A version without its local label (`2.13.0+cu130` -> `2.13.0`); the text itself if not a version."""
    version = parse_version(text)
    return version.public if version is not None else str(text).split("+")[0]


def requirements(lines: Iterable[str]) -> list[Requirement]:
    """The parseable requirements among `lines` (metadata lines that are not PEP 508 are skipped)."""
    from packaging.requirements import InvalidRequirement, Requirement

    out: list[Requirement] = []
    for line in lines:
        try:
            out.append(Requirement(line))
        except InvalidRequirement:
            continue
    return out


def exact_pin(lines: Iterable[str], name: str) -> tuple[Requirement, str] | None:
    """The first requirement on distribution `name` pinned exactly (`==X` or `===X`), and X."""
    from packaging.utils import canonicalize_name

    wanted = canonicalize_name(name)
    for req in requirements(lines):
        if canonicalize_name(req.name) != wanted:
            continue
        for spec in req.specifier:
            if spec.operator in ("==", "===") and "*" not in spec.version:
                return req, spec.version
    return None


def pinned(lines: Iterable[str], name: str) -> str | None:
    """The version `name` is pinned to exactly in `lines` (`torch (==2.11.0)` -> `2.11.0`), or None."""
    found = exact_pin(lines, name)
    return found[1] if found else None


def pinned_with_prefix(lines: Iterable[str], prefix: str) -> tuple[str, str] | None:
    """The first exactly pinned requirement whose name starts with `prefix`, as (name, version)."""
    from packaging.utils import canonicalize_name

    want = canonicalize_name(prefix)
    for req in requirements(lines):
        if canonicalize_name(req.name).startswith(want):
            found = exact_pin([str(req)], req.name)
            if found:
                return req.name, found[1]
    return None


# NVIDIA's integer version codes, decoded in one place.
def cuda_numbers(code: int) -> tuple[int, int]:
    """A CUDA version as the driver API and torchvision write it (1000*major + 10*minor): 12080 -> (12, 8)."""
    return code // 1000, code % 1000 // 10


def cuda_version_text(code: int) -> str:
    """`cuda_numbers` as text: 12080 -> '12.8', 13000 -> '13.0'."""
    major, minor = cuda_numbers(code)
    return f"{major}.{minor}"


def cudnn_numbers(code: int) -> tuple[int, int, int]:
    """A cuDNN version as `cudnnGetVersion` writes it: 10000*major + 100*minor + patch from cuDNN 9 on
    (91900 -> (9, 19, 0)), 1000*major + 100*minor + patch before (8902 -> (8, 9, 2))."""
    major, rest = divmod(code, 10000) if code >= 90000 else divmod(code, 1000)
    return major, rest // 100, rest % 100


def cudnn_version_text(code: int) -> str:
    """`cudnn_numbers` as text: 91900 -> '9.19.0'."""
    return ".".join(map(str, cudnn_numbers(code)))


# torchvision 0.(m+15) is the release built against torch 2.m (2.8 -> 0.23, 2.11 -> 0.26).
TORCHVISION_MINOR_OFFSET = 15


def torchvision_minor_for(torch_minor: int) -> int:
    """The torchvision 0.x minor built for torch 2.`torch_minor`."""
    return torch_minor + TORCHVISION_MINOR_OFFSET


def torch_minor_for(torchvision_minor: int) -> int | None:
    """The torch 2.x minor torchvision 0.`torchvision_minor` was built for; None before the rule held."""
    minor = torchvision_minor - TORCHVISION_MINOR_OFFSET
    return minor if minor >= 0 else None
