"""Which torchvision pairs with which torch (and CUDA), and what an import error says about the build: the pure
rules of vision.ops and vision.import (envcheck.checks.vision runs them live)."""

from __future__ import annotations

import re

from envcheck.core.versions import (
    cuda_version_text,
    pinned,
    public,
    release,
    torch_minor_for,
    torchvision_minor_for,
)


def matching_torchvision(torch_version: str) -> str | None:
    """The torchvision minor that pairs with a torch release (2.8 -> 0.23, 2.13 -> 0.28)."""
    numbers = release(torch_version)
    return (
        f"0.{torchvision_minor_for(numbers[1])}"
        if numbers and len(numbers) >= 2 and numbers[0] == 2
        else None
    )


def fix_command(torch_version: str) -> str:
    """The concrete reinstall that makes torch and torchvision match."""
    base = public(torch_version)
    tv = matching_torchvision(base)
    pair = f"torch=={base} torchvision=={tv}.*" if tv else "torch torchvision"
    return (
        f"pip install --force-reinstall {pair} from ONE index (PyPI's CUDA wheels, or e.g. "
        "--index-url https://download.pytorch.org/whl/cu128); a CUDA torchvision never works with a CPU torch"
    )


def cuda_text(value: object) -> str | None:
    """torchvision >= 0.26 reports its CUDA as an int (13000); older ones as text ('12.8')."""
    if isinstance(value, int) and not isinstance(value, bool):
        return cuda_version_text(value)
    return None if value is None else str(value)


def pair_fix(torch_version: str, tv_version: str) -> str:
    """Both ways to make an unsupported pair match: the torch this torchvision was built for, or the reverse."""
    numbers = release(tv_version)
    torch_minor = torch_minor_for(numbers[1]) if numbers and len(numbers) >= 2 and numbers[0] == 0 else None
    back = (
        f"pip install --force-reinstall torch==2.{torch_minor}.* torchvision=={tv_version}"
        if torch_minor is not None
        else ""
    )
    return (f"{back} (the torch this torchvision was built for), or " if back else "") + fix_command(
        torch_version
    )


def torch_pin(requires: list[str]) -> str | None:
    """The torch this torchvision was built for, from its metadata: `torch==2.9.1` or `torch (==2.11.0)`."""
    return pinned(requires, "torch")


def cuda_mismatch(torch_cuda: str | None, tv_cuda: str | None) -> str | None:
    """A CPU/CUDA or CUDA-major mismatch between torch and torchvision, or None.

    Like torchvision's own import check, only the major version must agree: CUDA minor versions are
    compatible (PyPI's torchvision 0.29.2 is built with CUDA 13.2 for torch 2.14.1's CUDA 13.0).
    """
    if (torch_cuda or None) is None or (tv_cuda or None) is None:
        if (torch_cuda or None) == (tv_cuda or None):
            return None
        return f"torchvision is built for CUDA {tv_cuda or 'none (CPU)'}, torch for CUDA {torch_cuda or 'none (CPU)'}"
    if (release(str(torch_cuda)) or (None,))[0] != (release(str(tv_cuda)) or (None,))[0]:
        return (
            f"torchvision is built for CUDA {tv_cuda}, torch for CUDA {torch_cuda} (different major versions)"
        )
    return None


def pairing_problem(torch_version: str, tv_version: str, pin: str | None) -> str | None:
    """Why this torchvision is not the one built for this torch, or None when they pair.

    torchvision's metadata may pin torch exactly (`torch==2.9.1`) or only bound it (`torch>=2.14.0`),
    so the release rule (torch 2.m pairs with torchvision 0.(m+15)) is checked as well.
    """
    base = public(torch_version)
    if pin and public(pin) != base:
        return f"torchvision {tv_version} was built for torch {pin}, but torch {torch_version} is installed"
    want = matching_torchvision(base)
    if want and (release(tv_version) or ())[:2] != release(want):
        return (
            f"torch {torch_version} pairs with torchvision {want}.x, but torchvision {tv_version} is "
            "installed (torch 2.m pairs with torchvision 0.(m+15))"
        )
    return None


# What torchvision says when its C++ ops were built for another torch or CUDA than the one installed (a CUDA
# torchvision on a CPU torch fails with the first; torchvision's own hint names the third).
BUILD_MISMATCH = (
    "torchvision::nms does not exist",
    "undefined symbol",
    "couldn't load custom c++ ops",
    "compiled with a different version",
    "was compiled against",
)


# Loading the ops library directly shows the loader's own reason, which torchvision's import hides behind
# "operator torchvision::nms does not exist": a CUDA torchvision on a CPU torch cannot find CUDA's runtime.
_CUDA_LIBRARY = re.compile(
    r"(lib(?:c10_cuda|torch_cuda|cudart|cublas\w*|cusparse|cufft|curand|cusolver|nvrtc|nvjpeg|nvToolsExt|"
    r"nvJitLink)\.so[.\d]*): cannot open shared object file"
)


def build_mismatch(error: str) -> str | None:
    """The versions/build cause an import error names, or None when the error is about something else."""
    low = error.lower()
    if any(s in low for s in BUILD_MISMATCH):
        return "torchvision's C++ ops were built for another torch or CUDA than the one installed"
    missing = _CUDA_LIBRARY.search(error)
    if missing:
        return (
            f"torchvision's C++ ops need {missing.group(1)}, a CUDA library this torch does not have: a "
            "CUDA torchvision with a CPU-only torch, or one built for another CUDA major"
        )
    return None
