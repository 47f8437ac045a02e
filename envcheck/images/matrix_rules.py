"""Field rules for one matrix row: each returns a problem sentence, or None when the value is fine."""

from __future__ import annotations

import re
from typing import Any

from envcheck.core.versions import parse_version, release, torchvision_minor_for

TARGETS = ("runtime", "devel", "jupyter", "ssh")
PYPI_INDEX_URLS = ("https://pypi.org/simple", "https://pypi.org/simple/")

# CUDA of PyPI's default Linux x86_64 torch wheels, read from their metadata
# (nvidia-cuda-runtime-cu12==12.8.90 for 2.8-2.10; cuda-toolkit==13.0.x for 2.11-2.14, 13.2.2 for 2.15).
PYPI_CUDA: dict[tuple[int, int], str] = {
    (2, 8): "12.8",
    (2, 9): "12.8",
    (2, 10): "12.8",
    (2, 11): "13.0",
    (2, 12): "13.0",
    (2, 13): "13.0",
    (2, 14): "13.0",
    (2, 15): "13.2",
}

# TORCH_CUDA_ARCH_LIST of the Linux x86_64 torch wheels per CUDA flavour, from pytorch/pytorch's wheel build
# script .ci/manywheel/build_cuda.sh: release/2.8 (12.6 "5.0;6.0;7.0;7.5;8.0;8.6;9.0", 12.8
# "7.0;7.5;8.0;8.6;9.0;10.0;12.0", 12.9 "...;12.0+PTX"), and from 2.9 on 13.0 "7.5;8.0;8.6;9.0;10.0;12.0+PTX"
# (CUDA 13 dropped sm_50-sm_70; aarch64 adds 11.0). Later releases were assumed unchanged per flavour;
# `envcheck facts` (torch._C._cuda_getArchFlags) reads the truth inside an image.
WHEEL_ARCH_LISTS: dict[str, str] = {
    "12.6": "5.0;6.0;7.0;7.5;8.0;8.6;9.0",
    "12.8": "7.0;7.5;8.0;8.6;9.0;10.0;12.0",
    "12.9": "7.0;7.5;8.0;8.6;9.0;10.0;12.0+PTX",
    "13.0": "7.5;8.0;8.6;9.0;10.0;12.0+PTX",
}


def arch_list(torch_cuda_arch_list: str) -> list[str]:
    """TORCH_CUDA_ARCH_LIST ('8.6;12.0+PTX') as torch.cuda.get_arch_list() writes it (sm_86, sm_120, compute_120)."""
    out: list[str] = []
    for item in torch_cuda_arch_list.replace(" ", ";").split(";"):
        if not item:
            continue
        number, ptx = item.removesuffix("+PTX"), item.endswith("+PTX")
        digits = number.replace(".", "")
        out.append(f"sm_{digits}")
        if ptx:
            out.append(f"compute_{digits}")
    return out


# fullmatch with explicit ASCII classes: `$` also matches before a final newline, and `\d` matches any
# Unicode digit; a newline in a value would inject lines into the `KEY=VALUE` build_args of CI.
_ROW_ID = re.compile(r"[a-z0-9][a-z0-9.-]*")
_PYTHON = re.compile(r"3\.[0-9]{1,2}")
_IMAGE_REF = re.compile(r"[a-z0-9][a-z0-9._/:@-]*")
_URL = re.compile(
    r"https://[A-Za-z0-9._~:/?#\[\]@!$&'()*+,;=%-]+"
)  # RFC 3986 characters: no space or control
_INDEX_CUDA = re.compile(r"/cu([0-9]{3})/?\Z")


def version_tuple(text: str) -> tuple[int, ...]:
    """`2.9.1` -> (2, 9, 1) (PEP 440 release numbers, via packaging); callers validate the format first."""
    return release(text) or ()


def _exact(value: Any, parts: int) -> bool:
    """A plain release with exactly `parts` numbers (`2.9.1`, `12.8`): no pre/post/dev/local part, no epoch."""
    if not isinstance(value, str) or not value.isascii():
        return False
    version = parse_version(value)
    return (
        version is not None
        and str(version) == value
        and len(version.release) == parts
        and not (version.is_prerelease or version.is_postrelease or version.local or version.epoch)
    )


def check_row_id(value: Any) -> str | None:
    """Row ids become part of CI job names: lowercase letters, digits, dots and dashes."""
    if not isinstance(value, str) or not _ROW_ID.fullmatch(value):
        return f"{value!r} is not a row id (lowercase letters, digits, '.', '-'; e.g. '2.9-cu128')"
    return None


def check_torch(value: Any) -> str | None:
    """torch must be an exact 2.x.y release."""
    if not _exact(value, 3):
        return f"{value!r} is not an exact version like '2.9.1'"
    if version_tuple(value)[0] != 2:
        return f"{value!r}: only torch 2.x is supported"
    return None


def check_torchvision(value: Any, torch: str) -> str | None:
    """torchvision 0.(m+15).x is the release built against torch 2.m."""
    if not _exact(value, 3):
        return f"{value!r} is not an exact version like '0.24.1'"
    minor = version_tuple(torch)[1]
    major_tv, minor_tv, _ = version_tuple(value)
    if (major_tv, minor_tv) != (0, torchvision_minor_for(minor)):
        return f"{value!r} does not match torch 2.{minor}.x (expected 0.{torchvision_minor_for(minor)}.x)"
    return None


def check_torchaudio(value: Any, torch: str) -> str | None:
    """torchaudio is optional ('' where no release exists); else it shares torch's major.minor."""
    if value == "":
        return None
    if not _exact(value, 3):
        return f"{value!r} is not an exact version like '2.9.1' (or '' when no release exists)"
    major, minor = version_tuple(torch)[:2]
    if version_tuple(value)[:2] != (major, minor):
        return f"{value!r} does not match torch {major}.{minor}.x (expected {major}.{minor}.x)"
    return None


def check_cuda(value: Any) -> str | None:
    """CUDA flavour as major.minor, 11.x to 13.x."""
    if not _exact(value, 2):
        return f"{value!r} is not a CUDA version like '12.8'"
    if not 11 <= version_tuple(value)[0] <= 13:
        return f"{value!r}: CUDA major must be 11, 12 or 13"
    return None


def check_index_url(value: Any, torch: str, cuda: str) -> str | None:
    """The index must serve the row's CUDA flavour: PyPI's default, or a `.../cuXYZ` index."""
    if not isinstance(value, str) or not _URL.fullmatch(value):
        return (
            f"{value!r} is not an https:// wheel index URL (no spaces, newlines or other control characters)"
        )
    if value in PYPI_INDEX_URLS:
        key = version_tuple(torch)[:2]
        pypi_cuda = PYPI_CUDA.get((key[0], key[1]))
        if pypi_cuda is None:
            return f"no record of which CUDA PyPI's torch {torch} wheels use; add it to PYPI_CUDA"
        if pypi_cuda != cuda:
            tag = "cu" + cuda.replace(".", "")
            return (
                f"PyPI's torch {torch} wheels are CUDA {pypi_cuda}, not {cuda} "
                f"(use https://download.pytorch.org/whl/{tag})"
            )
        return None
    match = _INDEX_CUDA.search(value)
    if match is None:
        return f"{value!r} is neither PyPI ({PYPI_INDEX_URLS[0]}) nor an index ending in /cuXYZ"
    expected = "cu" + cuda.replace(".", "")
    if "cu" + match.group(1) != expected:
        return (
            f"{value!r} serves cu{match.group(1)}, but the row says cuda {cuda!r} (expected .../{expected})"
        )
    return None


def check_python(value: Any) -> str | None:
    """Python as major.minor; the base image must ship that python3."""
    if not isinstance(value, str) or not _PYTHON.fullmatch(value):
        return f"{value!r} is not a Python version like '3.11'"
    return None


def check_base_image(value: Any) -> str | None:
    """An apt-based image reference (name[:tag][@digest])."""
    if not isinstance(value, str) or not _IMAGE_REF.fullmatch(value):
        return f"{value!r} is not an image reference like 'debian:bookworm-slim'"
    return None


def check_targets(value: Any) -> str | None:
    """A non-empty list of known Dockerfile targets, without repeats."""
    if not isinstance(value, list) or not value or not all(isinstance(t, str) for t in value):
        return f"{value!r} is not a non-empty list of targets from {list(TARGETS)}"
    unknown = [t for t in value if t not in TARGETS]
    if unknown:
        return f"unknown target(s) {unknown}; known: {list(TARGETS)}"
    if len(set(value)) != len(value):
        return f"{value!r} repeats a target"
    return None


def check_latest(value: Any) -> str | None:
    """`latest` is a boolean."""
    if not isinstance(value, bool):
        return f"{value!r} is not true or false"
    return None


AMD64, ARM64 = "linux/amd64", "linux/arm64"
PLATFORMS = (AMD64, ARM64)
# The torch minors whose PyPI aarch64 wheels are CUDA builds, with the CUDA their metadata names (read with
# `pip install --dry-run --platform manylinux_2_28_aarch64 --report`: 2.8-2.10 list their nvidia-* wheels for
# x86_64 only, so their aarch64 wheels are CPU builds; 2.11-2.14 require cuda-toolkit 13.0.x on every Linux).
# A row may list linux/arm64 only where its wheels exist for aarch64 with the row's CUDA.
PYPI_AARCH64_CUDA: dict[tuple[int, int], str] = {
    (2, 11): "13.0",
    (2, 12): "13.0",
    (2, 13): "13.0",
    (2, 14): "13.0",
}


def check_platforms(value: Any, torch: str, cuda: str, index_url: str) -> str | None:
    """linux/amd64, plus linux/arm64 where the row's index serves aarch64 CUDA wheels of the row's CUDA."""
    if not isinstance(value, list) or not value or not all(isinstance(p, str) for p in value):
        return f"{value!r} is not a non-empty list of platforms from {list(PLATFORMS)}"
    unknown = [p for p in value if p not in PLATFORMS]
    if unknown:
        return f"unknown platform(s) {unknown}; known: {list(PLATFORMS)}"
    if len(set(value)) != len(value) or AMD64 not in value:
        return f"{value!r}: list each platform once, {AMD64} included"
    if ARM64 in value:
        key = version_tuple(torch)[:2]
        have = PYPI_AARCH64_CUDA.get((key[0], key[1])) if index_url in PYPI_INDEX_URLS else None
        if have != cuda:
            return (
                f"no aarch64 CUDA {cuda} wheels on record for torch {torch} from {index_url} "
                "(PyPI's aarch64 torch is a CUDA build from 2.11 on; see PYPI_AARCH64_CUDA)"
            )
    return None
