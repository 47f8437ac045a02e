"""Find and remove the NCCL shared-memory segments (/dev/shm/nccl-*) that killed ranks leave behind."""

from __future__ import annotations

import os
from pathlib import Path

SHM_DIR = Path("/dev/shm")
PREFIX = "nccl-"


def segments_mapped_by(pid: int, shm_dir: Path = SHM_DIR, prefix: str = PREFIX) -> set[str]:
    """Paths of `prefix*` files under `shm_dir` that process `pid` has mapped (from /proc/PID/maps)."""
    found: set[str] = set()
    try:
        lines = Path(f"/proc/{pid}/maps").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        path = line.split(maxsplit=5)[5] if len(line.split(maxsplit=5)) == 6 else ""
        path = path.removesuffix(" (deleted)")
        if path.startswith(f"{shm_dir}/{prefix}"):
            found.add(path)
    return found


def remove_segments(paths: set[str]) -> list[str]:
    """Unlink the given segments; return those that were actually removed."""
    removed = []
    for path in sorted(paths):
        try:
            os.unlink(path)
            removed.append(path)
        except FileNotFoundError:
            continue
        except OSError:
            continue
    return removed
