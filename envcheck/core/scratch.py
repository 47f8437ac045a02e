"""Scratch files for the engine that need no writable directory: memory-backed first, a temp dir only as fallback.

A hardened runtime (`docker run --read-only` without `--tmpfs /tmp`, a pod with `readOnlyRootFilesystem`) leaves no
writable temp dir, HOME or passwd entry; envcheck's own logs must not need any of them. `memfd_create` (Linux
3.17+, allowed by Docker's and Kubernetes' RuntimeDefault seccomp profiles) gives an anonymous file in memory.
"""

from __future__ import annotations

import os
import tempfile
from typing import IO


def scratch_file(name: str) -> IO[bytes]:
    """A read-write binary file that lives in memory (memfd), or in the temp dir where memfd is unavailable."""
    memfd_create = getattr(os, "memfd_create", None)
    if memfd_create is not None:
        try:
            fd = memfd_create(name, getattr(os, "MFD_CLOEXEC", 1))
        except OSError:
            pass  # seccomp denied it, or an old kernel: the temp dir is the next choice
        else:
            return open(fd, "w+b", buffering=0)
    return tempfile.TemporaryFile(prefix=f"{name}-")
