"""Why the Docker daemon refused to give a container its GPUs: the daemon's own words mapped to cause, fix and class.

The texts, as users have met them (`docker: Error response from daemon: ...`):
- `could not select device driver "" with capabilities: [[gpu]]`: no NVIDIA device driver in the daemon, which
  registers it only when nvidia-container-runtime-hook is on its PATH at start (moby daemon/nvidia_linux.go;
  NVIDIA/nvidia-docker#1352, OpenBMB/XAgent#273 fixed by installing the toolkit; `"nvidia"` in compose:
  infiniflow/ragflow#9573; and this machine's own engine).
- `unresolvable CDI devices nvidia.com/gpu=all` (NVIDIA/nvidia-container-toolkit#146, #434; moby/moby#47633).
- `nvidia-container-cli: initialization error: nvml error: driver not loaded: unknown`
  (NVIDIA/nvidia-container-toolkit#260, #1269).
- `nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.8, please update your driver to a
  newer version, or use an earlier cuda container: unknown` (SyneRBI/PETRIC2#27, theroyallab/tabbyAPI#324;
  NVIDIA_DISABLE_REQUIRES=true as the workaround: NVIDIA/nvidia-container-toolkit#152).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from envcheck.core.cuda_compat import MAJOR_FLOOR
from envcheck.core.findings import Finding
from envcheck.core.result import FaultClass

# The Docker/NVIDIA container toolkit facts the daemon's refusals and `envcheck host` share (host imports them).
CDI_FIX = (
    "sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml (then nvidia-ctk cdi list shows the devices)"
)
NVIDIA_CAPS = ("compute", "compat32", "graphics", "utility", "video", "display")
DRIVER_CAPS = frozenset(
    {"gpu", "nvidia", *NVIDIA_CAPS}
)  # the capability set Docker's nvidia driver registers

TOOLKIT_FIX = (
    "install nvidia-container-toolkit on the host, then `sudo nvidia-ctk runtime configure "
    "--runtime=docker && sudo systemctl restart docker` (the daemon looks for the NVIDIA hook only when it "
    "starts); or pass --allow-cpu"
)
_SELECT = re.compile(r'could not select device driver "([^"]*)" with capabilities: \[\[([^\]]*)\]\]')
_CDI = re.compile(r"unresolvable CDI devices ([^\s:,]+(?:,\s*[^\s:,]+)*)")
_NO_DRIVER = re.compile(r"nvidia-container-cli: initialization error: nvml error: driver not loaded")
_REQUIRE = re.compile(
    r"nvidia-container-cli: requirement error: unsatisfied condition: cuda\s*>=\s*(\d+)\.(\d+)"
)


@dataclass(frozen=True, kw_only=True)
class GpuRefusal(Finding):
    """One refusal: the finding (the cause, the fix, who must act), and the daemon's words that matched."""

    matched: str

    @property
    def cause(self) -> str:
        """The cause in words (the finding's problem)."""
        return self.problem


def _select(m: re.Match[str]) -> GpuRefusal:
    driver, caps = m.group(1), m.group(2).split()
    unknown = [c for c in caps if c not in DRIVER_CAPS]
    if unknown:
        return GpuRefusal(
            f"the GPU request asks for capabilities {caps}, and "
            f"{', '.join(map(repr, unknown))} is none of the nvidia driver's",
            "capabilities: [gpu, "
            "compute, utility] (for every NVIDIA capability: -e NVIDIA_DRIVER_CAPABILITIES=all)",
            FaultClass.CONFIG,
            matched=m.group(0),
        )
    which = f"has no device driver {driver!r}" if driver else "has no NVIDIA device driver"
    return GpuRefusal(
        f"the Docker daemon {which}: nvidia-container-toolkit is not installed or "
        "Docker was not configured and restarted for it",
        TOOLKIT_FIX,
        FaultClass.NODE,
        matched=m.group(0),
    )


def explain_gpu_refusal(text: str, row_of: Callable[[], str | None] = lambda: None) -> GpuRefusal | None:
    """The cause, fix and fault class for a daemon's GPU refusal, or None when `text` is another error;
    `row_of()` names the image's matrix row for the CUDA requirement."""
    if m := _SELECT.search(text):
        return _select(m)
    if m := _CDI.search(text):
        return GpuRefusal(
            f"no CDI spec on the host offers {m.group(1)} (none generated, or generated "
            "before a driver change and unreadable now)",
            CDI_FIX,
            FaultClass.NODE,
            matched=m.group(0),
        )
    if m := _NO_DRIVER.search(text):
        return GpuRefusal(
            "the NVIDIA kernel driver is not loaded on the host",
            "on the host, nvidia-smi must work: sudo modprobe nvidia, or reinstall the driver for the "
            "running kernel (a kernel update without the driver's DKMS module) and reboot",
            FaultClass.NODE,
            matched=m.group(0),
        )
    if m := _REQUIRE.search(text):
        major, minor = m.group(1), m.group(2)
        row = row_of()
        floor = MAJOR_FLOOR.get(int(major))
        compat = (
            f"; a driver >= {floor} runs CUDA {major}.x through minor-version compatibility, so there "
            "-e NVIDIA_DISABLE_REQUIRES=true starts it (no PTX JIT newer than the driver)"
            if floor
            else ""
        )
        return GpuRefusal(
            f"the image{f' (matrix row {row})' if row else ''} needs a driver with CUDA >= "
            f"{major}.{minor} (NVIDIA_REQUIRE_CUDA), and the host's driver is older",
            f"upgrade the host driver, or run a row built for an older CUDA (`envcheck host` lists the "
            f"rows that run on this driver){compat}",
            FaultClass.NODE,
            matched=m.group(0),
        )
    return None


def matrix_row_of(image: str, rows: Sequence[Any]) -> str | None:
    """The id of the matrix row whose tags include the image's tag (`envcheck:2.8-cuda12.8-runtime`)."""
    tag = image.rpartition(":")[2] if ":" in image.rpartition("/")[2] else ""
    for row in rows:
        if any(tag in row.tags(target) for target in row.targets):
            return str(row.id)
    return None


def default_row_of(image: str) -> Callable[[], str | None]:
    """A lazy lookup of the image's row in the default matrix (None when there is no matrix to read)."""

    def find() -> str | None:
        from envcheck.core.errors import UsageError
        from envcheck.images.matrix import default_matrix_path, load_matrix

        try:
            return matrix_row_of(image, list(load_matrix(default_matrix_path()).rows))
        except (UsageError, OSError):
            return None

    return find
