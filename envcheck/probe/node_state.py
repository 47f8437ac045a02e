"""What a node remembers between envcheck runs (cluster modes only): small JSON records in one folder, each
written atomically (a temp file beside it, fsync, rename), each tied to this boot so a reboot starts clean.

The folder is ENVCHECK_STATE_DIR, else /var/lib/envcheck (where the Slurm prolog keeps its verdict too). A record
that cannot be read is no record; one that cannot be written is a one-line note, never a failure of the node.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from typing import Any

STATE_DIR = "/var/lib/envcheck"
BOOT_ID = "/proc/sys/kernel/random/boot_id"


def boot_id(path: str = BOOT_ID) -> str:
    """This boot's id ('' when unknown): a record from another boot means nothing here."""
    try:
        with open(path, encoding="ascii") as f:
            return f.read(64).strip()
    except OSError:
        return ""


def state_dir() -> str:
    """ENVCHECK_STATE_DIR, else /var/lib/envcheck."""
    return os.environ.get("ENVCHECK_STATE_DIR") or STATE_DIR


def write_json(path: str, data: Any) -> str | None:
    """Replace `path` with `data` as JSON, atomically; the problem in one line when it cannot."""
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".envcheck-", dir=folder)
    except OSError as exc:
        return f"{folder}: {exc.strerror}"
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        return None
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return f"{path}: {exc.strerror}"


def read_json(path: str) -> Any:
    """The JSON in `path`, or None when it is missing or unreadable."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def count_overrun(kind: str, overran: bool, folder: str | None = None) -> tuple[int, str | None]:
    """Consecutive runs of this boot in which `kind` (e.g. 'gpu-init') overran its budget, this run included (0
    when it did not overrun: the streak ends), and a note when the record could not be saved."""
    path = os.path.join(folder or state_dir(), f"{kind}-overruns.json")
    saved = read_json(path)
    boot = boot_id()
    before = saved.get("count") if isinstance(saved, dict) and saved.get("boot_id") == boot else 0
    count = (before if isinstance(before, int) and before > 0 else 0) + 1 if overran else 0
    if not overran and not before:
        return 0, None  # nothing to remember, nothing written
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
    except OSError:
        pass  # write_json says why
    note = write_json(path, {"boot_id": boot, "count": count})
    return count, f"{kind} overrun count not saved: {note}" if note else None
