"""image.versions: what an envcheck image declares (build-time metadata) is what is installed now."""

from __future__ import annotations

import importlib.metadata
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from envcheck.core.check import CheckSpec, Context, Needs
from envcheck.core.result import FaultClass, Result, failed, passed, skipped

IMAGE_JSON = Path("/etc/envcheck/image.json")
PACKAGES = ("torch", "torchvision", "torchaudio")
# Declared fields and the ENV variable the Dockerfile sets for each.
ENV_NAMES = {
    "torch": "ENVCHECK_TORCH_VERSION",
    "torchvision": "ENVCHECK_TORCHVISION_VERSION",
    "torchaudio": "ENVCHECK_TORCHAUDIO_VERSION",
    "cuda": "ENVCHECK_CUDA_VERSION",
}


def read_declared(path: Path = IMAGE_JSON) -> dict[str, Any] | None:
    """The build-time declaration, or None when this is not one of our images."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    return data if isinstance(data, dict) else {}


def read_installed() -> dict[str, str | None]:
    """Installed distribution versions (None if absent) and the CUDA torch was built with."""
    found: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    if found["torch"] is None:
        found["cuda"] = None
    else:
        import torch

        found["cuda"] = torch.version.cuda or "cpu"
    return found


def image_fix(declared: Mapping[str, Any]) -> str:
    """The reinstall that restores what the image declares (vision.ops offers the same one inside an image)."""
    pins = " ".join(f"{p}=={declared[p]}" for p in PACKAGES if declared.get(p))
    index = declared.get("index_url") or "https://pypi.org/simple"
    return f"pip install --force-reinstall {pins} --index-url {index} (or use a fresh image)"


def _base(version: str | None) -> str | None:
    return None if version is None else version.split("+")[0]


def compare_versions(
    declared: Mapping[str, Any] | None,
    environ: Mapping[str, str],
    installed: Callable[[], dict[str, str | None]] = read_installed,
) -> Result:
    """Pass when every declared version is installed; fail naming each drifted package."""
    if declared is None:
        if environ.get("ENVCHECK_IMAGE") == "1":
            return failed(
                f"ENVCHECK_IMAGE=1 but {IMAGE_JSON} is missing: the image metadata was removed",
                "rebuild the image with `make image`",
                fault_class=FaultClass.IMAGE,
            )
        return skipped(f"not inside an envcheck image (no {IMAGE_JSON}, ENVCHECK_IMAGE unset)")
    expected = {k: declared.get(k) for k in (*PACKAGES, "cuda")}
    env_mismatch = [
        f"{var}={environ.get(var)!r} but image.json says {expected[k]!r}"
        for k, var in ENV_NAMES.items()
        if var in environ and environ[var] != (expected[k] or "")
    ]
    if env_mismatch:
        return failed(
            "image declaration is inconsistent: " + "; ".join(env_mismatch),
            "do not override ENVCHECK_* variables; rebuild the image",
            expected=expected,
            fault_class=FaultClass.CONFIG,
        )
    measured = installed()
    drift = []
    for name in (*PACKAGES, "cuda"):
        want = expected.get(name)
        if not want:  # e.g. no torchaudio release for this torch
            continue
        have = measured.get(name) if name == "cuda" else _base(measured.get(name))
        if have != want:
            drift.append(f"{name} {have or 'missing'} (image declares {want})")
    if drift:
        return failed(
            "installed versions drifted from the image: " + ", ".join(drift),
            image_fix(declared),
            measured=measured,
            expected=expected,
            fault_class=FaultClass.IMAGE,
        )
    tag = f"torch {expected['torch']} + CUDA {expected['cuda']}"
    return passed(
        f"installed packages match the image declaration ({tag})", measured=measured, expected=expected
    )


def image_versions(ctx: Context) -> Result:
    """Inside an envcheck image, torch/torchvision/torchaudio/CUDA are the versions it was built with."""
    return compare_versions(read_declared(), os.environ)


CHECKS: tuple[CheckSpec, ...] = (
    CheckSpec(
        name="image.versions",
        func=image_versions,
        description="installed torch/torchvision/torchaudio/CUDA match what the image declares",
        needs=Needs(),
        timeout_s=60.0,
    ),
)
