"""The two halves of the NVIDIA driver and their versions: the loaded kernel module (/proc/driver/nvidia/version) and
the user-space driver this process loads (libnvidia-ml.so.<version>, libcuda.so.<version>). They must be the same
release: after an upgrade without a reboot the old module is still loaded and the new libraries refuse it (NVML's
"Driver/library version mismatch", the kernel's "NVRM: API mismatch"). No verdicts here."""

from __future__ import annotations

import glob
import os
import re

from envcheck.probe.system import mapped_paths, read_text

PROC_VERSION = "/proc/driver/nvidia/version"
# "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14  Thu Feb 22 01:44:30 UTC 2024" and the open module's
# "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  (...)" (pNVRM_ID, nv.c).
_MODULE = re.compile(r"Kernel Module\s+(?:for \S+\s+)?(\d+\.\d+(?:\.\d+)?)")
_LIBRARY = re.compile(r"/lib(?:nvidia-ml|cuda)\.so\.(\d+\.\d+(?:\.\d+)?)$")
# Where distributions and the container toolkit put the user-space driver (ldconfig's usual directories, the GPU
# operator's driver root): read only when no library is mapped into this process yet.
LIBRARY_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/nvidia/lib64",
    "/run/nvidia/driver/usr/lib/x86_64-linux-gnu",
)


def kernel_module_version(path: str = PROC_VERSION) -> str | None:
    """The loaded nvidia module's version ('550.54.14'), or None (no module loaded, or not readable here)."""
    found = _MODULE.search(read_text(path) or "")
    return found.group(1) if found else None


def userspace_version(maps: str | None = None, dirs: tuple[str, ...] = LIBRARY_DIRS) -> str | None:
    """The user-space driver's version: of the libnvidia-ml/libcuda this process mapped, else of the one installed
    in the usual directories; None when neither is found."""
    for path in sorted(mapped_paths(maps) or ()):
        found = _LIBRARY.search(os.path.realpath(path))
        if found:
            return found.group(1)
    for folder in dirs:
        for path in sorted(glob.glob(os.path.join(folder, "libnvidia-ml.so.*.*"))):
            found = _LIBRARY.search(path)
            if found:
                return found.group(1)
    return None
