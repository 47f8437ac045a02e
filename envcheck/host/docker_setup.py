"""Docker's GPU setup from files (`/etc/docker/daemon.json`, CDI spec dirs, the /dev/char links runc needs) and
`nvidia-ctk` on PATH."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from envcheck.core.cuda_compat import MAJOR_FLOOR

# The driver floor per CUDA major (minor-version compatibility) is one table: envcheck.core.cuda_compat.
MINOR_COMPAT_DRIVER = MAJOR_FLOOR


def _read(path: str) -> str:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return ""


def docker_gpu_setup(root: str = "/") -> dict[str, Any]:
    """Whether Docker can hand GPUs to containers: the nvidia runtime in daemon.json, nvidia-ctk, CDI specs."""
    base = Path(root)
    found: dict[str, Any] = {}
    daemon = base / "etc/docker/daemon.json"
    try:
        config = json.loads(daemon.read_text())
        runtimes = sorted((config.get("runtimes") or {}) if isinstance(config, dict) else {})
        found["daemon_json_runtimes"] = runtimes
        found["default_runtime"] = config.get("default-runtime") if isinstance(config, dict) else None
        opts = config.get("exec-opts") if isinstance(config, dict) else None
        found["cgroup_driver"] = next(
            (
                str(o).partition("=")[2]
                for o in opts or []
                if isinstance(opts, list) and str(o).startswith("native.cgroupdriver=")
            ),
            None,
        )
    except FileNotFoundError:
        found["daemon_json_runtimes"] = []
    except (OSError, ValueError) as exc:
        found["daemon_json_runtimes"] = []
        found["daemon_json_error"] = f"{daemon}: {exc}"
    path = (
        os.pathsep.join(str(base / p.lstrip("/")) for p in os.environ.get("PATH", "").split(os.pathsep) if p)
        if root != "/"
        else None
    )
    found["nvidia_ctk"] = shutil.which("nvidia-ctk", path=path)
    found["nvidia_container_runtime"] = shutil.which("nvidia-container-runtime", path=path)
    from envcheck.host.cdi import CDI_DIRS, spec_paths

    specs = spec_paths([str(base / d.lstrip("/")) for d in CDI_DIRS])
    found["cdi_specs"] = specs
    found["cdi_nvidia"] = [s for s in specs if "nvidia.com/gpu" in _read(s)]
    runtime = "nvidia" in found["daemon_json_runtimes"]
    if runtime or found["cdi_nvidia"]:
        how = " and ".join(
            filter(
                None,
                [
                    "the nvidia runtime in daemon.json" if runtime else "",
                    "CDI specs for nvidia.com/gpu" if found["cdi_nvidia"] else "",
                ],
            )
        )
        found["summary"] = f"Docker GPU setup: {how} (docker run --gpus all ...)"
        found["ready"] = True
    else:
        hint = (
            "nvidia-ctk is installed: run `sudo nvidia-ctk runtime configure --runtime=docker && "
            "sudo systemctl restart docker`"
            if found["nvidia_ctk"]
            else "install nvidia-container-toolkit, then `sudo nvidia-ctk runtime configure --runtime=docker`"
        )
        found["summary"] = (
            f"Docker GPU setup: none found (no nvidia runtime in {daemon}, no CDI spec); {hint}"
        )
        found["ready"] = False
    return found


def dev_char_problem(missing: list[str], cgroup_driver: str | None) -> dict[str, str] | None:
    """The host's NVIDIA nodes without /dev/char links: GPU containers under systemd's cgroup management lose them
    at the next `systemctl daemon-reload` (NVIDIA/nvidia-container-toolkit#48); None when none is missing or
    Docker is set to cgroupfs."""
    if not missing or cgroup_driver == "cgroupfs":
        return None
    from envcheck.checks.cuda.layers import DAEMON_RELOAD_FIX

    return {
        "problem": f"no /dev/char/<major>:<minor> link for {', '.join(missing)}: GPU containers run under the "
        "systemd cgroup driver lose these GPUs at the next `systemctl daemon-reload` ('Failed to "
        "initialize NVML: Unknown Error' inside them)",
        "fix": DAEMON_RELOAD_FIX.partition("; on the host, once: ")[2],
        "fault_class": "node",
    }


def dev_char_links(dev: str = "/dev") -> dict[str, Any]:
    """The NVIDIA nodes lacking /dev/char links, read on the host (a container's /dev has no /dev/char)."""
    from envcheck.checks.cuda.capture import missing_char_symlinks
    from envcheck.probe.system import in_container

    if in_container() is True:
        return {"checked": False, "why": "envcheck runs inside a container: run `envcheck host` on the host"}
    return {"checked": True, "missing": missing_char_symlinks(dev)}
