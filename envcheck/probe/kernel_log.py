"""Xid events from the kernel log: read what /dev/kmsg holds without ever blocking, parse NVRM Xid lines, and
say what each common code means.

NVML keeps no cheap Xid history, but the driver logs every Xid as a kernel message:
`NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.` The PCI address ties it to a GPU.
Meanings and actions follow NVIDIA's Xid catalog: https://docs.nvidia.com/deploy/xid-errors/index.html
(Ampere and newer: https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html).
"""

from __future__ import annotations

import errno
import json
import os
import time

from envcheck.probe.node_state import boot_id, write_json

KMSG = "/dev/kmsg"


MAX_LOG_BYTES = 16 * 2**20  # the kernel's ring buffer is at most a few MiB; stop well past that


MAX_LOG_SECONDS = 2.0


def read_kernel_log(path: str = KMSG) -> tuple[list[str], str | None]:
    """The kernel log's lines as buffered now, and why it could not be read (None: it was).

    /dev/kmsg is opened non-blocking: each read returns one record, EAGAIN means everything buffered has been
    read, so this never waits for new messages. Bounded by size and time."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        hint = (
            " (needs root or sysctl kernel.dmesg_restrict=0)"
            if exc.errno in (errno.EACCES, errno.EPERM)
            else ""
        )
        return [], f"{path}: {exc.strerror}{hint}"
    chunks: list[bytes] = []
    total, stop, why = 0, time.monotonic() + MAX_LOG_SECONDS, None
    try:
        while total < MAX_LOG_BYTES and time.monotonic() < stop:
            try:
                chunk = os.read(fd, 16384)
            except BlockingIOError:  # EAGAIN: all that is buffered has been read
                break
            except InterruptedError:
                continue
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # older records were overwritten while reading: go on
                    continue
                why = f"{path}: {exc.strerror}"
                break
            if not chunk:  # end of a regular file, or a FIFO with no writer
                break
            chunks.append(chunk)
            total += len(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", "replace").splitlines(), why


def read_cursor(state_file: str, boot: str | None = None) -> int | None:
    """The /dev/kmsg sequence number the last run read up to, if it was this boot's; None otherwise."""
    try:
        with open(state_file, encoding="utf-8") as f:
            saved = json.load(f)
        same = saved.get("boot_id") == (boot if boot is not None else boot_id())
        return int(saved["seq"]) if same and isinstance(saved.get("seq"), int) else None
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def write_cursor(state_file: str, seq: int, boot: str | None = None) -> str | None:
    """Save the cursor atomically (a temp file beside it, fsync, rename); a one-line note when it cannot."""
    note = write_json(state_file, {"boot_id": boot if boot is not None else boot_id(), "seq": seq})
    return f"kernel log cursor not saved: {note}" if note else None
