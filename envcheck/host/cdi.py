"""CDI specs on this host: which devices they offer, and the ones that cannot work.

Docker (CDI mode, `--device nvidia.com/gpu=all`) and podman resolve GPUs through the specs in /etc/cdi and
/var/run/cdi. A device no spec offers fails as `unresolvable CDI devices nvidia.com/gpu=all` (podman:
NVIDIA/nvidia-container-toolkit#146, NixOS/nixpkgs#420638; docker: "CDI device injection failed: unresolvable
CDI devices", moby/moby#47633). A spec generated before a driver upgrade names the old driver's files, and the
container fails to start (`crun: cannot stat /usr/lib/libnvidia-egl-wayland.so.1.1.13: No such file or
directory`, NVIDIA/nvidia-container-toolkit#692); NVIDIA's CDI guide: regenerate the spec when the driver changes.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from envcheck.core.errors import UsageError
from envcheck.host.documents import read_document
from envcheck.images.gpu_errors import CDI_FIX

CDI_DIRS = ("/etc/cdi", "/var/run/cdi")
GPU_KIND = "nvidia.com/gpu"
_LIB_VERSION = re.compile(r"\.so\.(\d{3}\.\d+(?:\.\d+)?)$")


def cdi_dirs() -> list[str]:
    """The folders to read: ENVCHECK_CDI_DIRS (os.pathsep-separated), else CDI's defaults."""
    chosen = os.environ.get("ENVCHECK_CDI_DIRS")
    return [d for d in chosen.split(os.pathsep) if d] if chosen else list(CDI_DIRS)


@dataclass
class CdiSpec:
    """One spec file: its kind, its device names, and the host paths it injects that do not exist."""

    path: str
    kind: str | None = None
    devices: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    error: str | None = None


def _host_paths(edits: Any) -> list[str]:
    if not isinstance(edits, dict):
        return []
    paths = [
        n.get("hostPath") or n.get("path") for n in edits.get("deviceNodes") or [] if isinstance(n, dict)
    ]
    paths += [m.get("hostPath") for m in edits.get("mounts") or [] if isinstance(m, dict)]
    paths += [h.get("path") for h in edits.get("hooks") or [] if isinstance(h, dict)]
    return [p for p in paths if isinstance(p, str)]


def spec_from(path: str, data: Any, exists: Callable[[str], bool] = os.path.exists) -> CdiSpec:
    """A parsed spec document's kind, devices and missing host paths (`exists` injectable for tests)."""
    if not isinstance(data, dict) or not isinstance(data.get("kind"), str):
        return CdiSpec(path, error="not a CDI spec (no 'kind')")
    devices = [d for d in data.get("devices") or [] if isinstance(d, dict)]
    paths = _host_paths(data.get("containerEdits"))
    for device in devices:
        paths += _host_paths(device.get("containerEdits"))
    missing = sorted({p for p in paths if not exists(p)})
    return CdiSpec(path, data["kind"], [str(d.get("name")) for d in devices], missing)


def spec_paths(dirs: Sequence[str]) -> list[str]:
    """Every *.yaml, *.yml and *.json file in `dirs` (the files CDI reads), folder by folder, sorted."""
    return [
        path
        for folder in dirs
        for path in sorted(
            p for pattern in ("*.yaml", "*.yml", "*.json") for p in glob.glob(os.path.join(folder, pattern))
        )
    ]


def read_specs(dirs: Sequence[str]) -> list[CdiSpec]:
    """Every spec in `dirs`, unreadable ones with their error."""
    specs: list[CdiSpec] = []
    for path in spec_paths(dirs):
        try:
            specs.append(spec_from(path, read_document(path, "CDI spec")))
        except UsageError as exc:
            specs.append(CdiSpec(path, error=exc.message))
    return specs


def _stale_versions(missing: list[str], driver: str | None) -> str:
    versions = sorted({m.group(1) for p in missing if (m := _LIB_VERSION.search(p))})
    if not versions:
        return ""
    now = f", but the driver is {driver}" if driver and driver not in versions else ""
    return f"; they are libraries of driver {', '.join(versions)}{now}"


def cdi_problems(specs: list[CdiSpec], gpus_present: bool, driver: str | None = None) -> list[dict[str, str]]:
    """Why a CDI GPU request would fail here: an unreadable spec, a stale one, or nvidia.com/gpu=all offered by
    none (only named when the host has GPUs). Docker's --gpus through the nvidia runtime hook needs no CDI."""
    found: list[dict[str, str]] = []
    for spec in specs:
        if spec.error:
            found.append(
                {
                    "problem": f"CDI spec {spec.path} cannot be used ({spec.error}): its devices are "
                    "unresolvable",
                    "fix": CDI_FIX,
                    "fault_class": "node",
                }
            )
        elif spec.missing:
            found.append(
                {
                    "problem": f"CDI spec {spec.path} ({spec.kind}) is stale: {len(spec.missing)} host "
                    f"path(s) it injects do not exist (first {spec.missing[0]})"
                    f"{_stale_versions(spec.missing, driver)}; containers given its devices fail "
                    "to start",
                    "fix": f"regenerate it after every driver upgrade: {CDI_FIX}",
                    "fault_class": "node",
                }
            )
    offered = [d for s in specs if s.kind == GPU_KIND and not s.error for d in s.devices]
    if gpus_present and "all" not in offered:
        what = (
            f"the {GPU_KIND} specs offer {', '.join(offered)} but not 'all'"
            if offered
            else f"no CDI spec offers {GPU_KIND}"
        )
        found.append(
            {
                "problem": f"{what}: --device {GPU_KIND}=all (podman; docker in CDI mode) fails with "
                f"'unresolvable CDI devices {GPU_KIND}=all' (docker --gpus through the nvidia "
                "runtime does not need CDI)",
                "fix": CDI_FIX,
                "fault_class": "node",
            }
        )
    return found


def cdi_report(dirs: Sequence[str], gpus_present: bool, driver: str | None = None) -> dict[str, Any]:
    """The specs (path, kind, devices, missing paths, error) and the problems, as JSON-able data."""
    specs = read_specs(dirs)
    return {
        "dirs": list(dirs),
        "specs": [
            {"path": s.path, "kind": s.kind, "devices": s.devices, "missing": s.missing, "error": s.error}
            for s in specs
        ],
        "problems": cdi_problems(specs, gpus_present, driver),
    }
