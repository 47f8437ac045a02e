"""The parser of every front door and its argument types: a bad value is one line and exit 2, never a traceback
(each command's flags are declared beside its request: run_args.py, fleet.py, ...)."""

from __future__ import annotations

import argparse
import math
import os
import re
import stat
import tempfile
from pathlib import Path

from envcheck.core.errors import UsageError
from envcheck.core.text import one_line


class Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing usage and exiting, so errors stay one line (every front door
    uses it, with the argument types below and `guard`)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message} (try `{self.prog} --help`)")


def _finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):  # nan compares false with every limit, so it would silently disable one
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number; give e.g. 10 or 2.5")
    return value


MESSAGE_UNITS = {
    "": 1,
    "K": 1024,
    "M": 1024**2,
    "G": 1024**3,
}  # nccl-tests' -b/-e suffixes (binary: 16G = 16 GiB)


def message_size(text: str) -> int:
    """argparse type for --min-busbw-at: bytes, or a size with nccl-tests' K/M/G suffix (`16G`), a multiple of 4."""
    body = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = body[-1:] if body[-1:] in MESSAGE_UNITS and body[-1:] else ""
    digits = body[: len(body) - len(unit)]
    if not digits.isdigit():
        raise argparse.ArgumentTypeError(
            f"{one_line(text)!r} is not a message size; give bytes or e.g. 16G, 512M"
        )
    value = int(digits) * MESSAGE_UNITS[unit]
    if not 4 <= value <= 1024**4 or value % 4:
        raise argparse.ArgumentTypeError(
            f"{one_line(text)} must be 4 bytes to 1T and a multiple of 4 (float32 elements), e.g. 16G"
        )
    return value


def positive_float(text: str) -> float:
    """argparse type for --timeout and --min-busbw: a finite number > 0."""
    value = _finite(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def non_negative_float(text: str) -> float:
    """argparse type for thresholds in percent: a finite number >= 0."""
    value = _finite(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def percent(text: str) -> float:
    """argparse type for a margin in percent (--perf-margin, fleet's --margin): a finite number from 0 to below 100."""
    value = _finite(text)
    if not 0 <= value < 100:
        raise argparse.ArgumentTypeError(f"must be a percentage from 0 to below 100 (e.g. 10), got {text}")
    return value


def fraction(text: str) -> float:
    """argparse type for --memory-fraction: a finite number in (0, 1]."""
    value = _finite(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be above 0 and at most 1 (a fraction, e.g. 0.1), got {text}")
    return value


def non_negative_int(text: str) -> int:
    """argparse type for GPU counts."""
    if not (text.isascii() and text.isdigit()):
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 0")
    return int(text)


# The gloo ranks of the CPU distributed check are forked processes on this host, each with its own torch
# import and TCP connections; beyond this many they exhaust the process and file limits long before they
# prove anything more than 2 ranks do.
MAX_CPU_RANKS = 64


def _forked_count(text: str, least: int, too_few: str, each: str, many: str = "") -> int:
    """A count of processes forked on this host: `least` to MAX_CPU_RANKS, `too_few` said below it."""
    value = non_negative_int(text)
    if value < least:
        raise argparse.ArgumentTypeError(f"{text}: {too_few}")
    if value > MAX_CPU_RANKS:
        raise argparse.ArgumentTypeError(
            f"{text}: at most {MAX_CPU_RANKS}; each {each} is a process forked on this host, and more exhaust the "
            f"process and file limits without proving more{many}"
        )
    return value


def rank_count(text: str) -> int:
    """argparse type for --cpu-ranks: 2 to MAX_CPU_RANKS (an all-reduce needs two ranks)."""
    return _forked_count(
        text,
        2,
        "an all-reduce needs at least 2 ranks (e.g. --cpu-ranks 2)",
        "rank",
        " (test many ranks with torchrun across nodes)",
    )


def worker_count(text: str) -> int:
    """argparse type for burn's --cpu-workers: 1 to MAX_CPU_RANKS (one worker burns alone: its repeats and the float64
    reference judge it, and the all-reduce, which needs two, is left out)."""
    return _forked_count(text, 1, "give at least 1 worker (e.g. --cpu-workers 2)", "worker")


def names(text: str) -> str:
    """argparse type for --only/--skip: at least one comma-separated name (an empty list is a mistake)."""
    if not [n for n in text.split(",") if n.strip()]:
        raise argparse.ArgumentTypeError(
            f"{text!r} names no check; give comma-separated names (see `envcheck list`)"
        )
    return text


NAME_MAX = 255
MAX_THREADS = 4096  # beyond any host's cores; torch.set_num_threads overflows a C int long before


def thread_count(text: str) -> int:
    """argparse type for --cpu-threads: a whole number from 1 to MAX_THREADS."""
    value = non_negative_int(text)
    if not 1 <= value <= MAX_THREADS:
        raise argparse.ArgumentTypeError(f"{text[:30]}: give 1 to {MAX_THREADS} threads")
    return value


def input_file(text: str) -> str:
    """argparse type for an input file (bench --baseline): a regular file that exists; a FIFO or device is
    refused (reading one can block forever)."""
    try:
        st = os.stat(text)
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"cannot read {one_line(text)}: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise argparse.ArgumentTypeError(
            f"{one_line(text)} is not a regular file (a folder, FIFO or device); "
            "give a report file that `envcheck bench --json` wrote"
        )
    return text


def output_path(text: str) -> str:
    """argparse type for --json/--junit: '-' (stdout) or a regular file we can write, whose folder exists.
    Nothing is created or opened for writing here (a later usage error must leave nothing behind), and a
    FIFO or device is refused (opening one can block forever)."""
    if text == "-":
        return text
    if not text or (text.endswith(os.sep) and not os.path.isdir(text)):
        raise argparse.ArgumentTypeError(f"{text!r} is not a file path; give e.g. report.json")
    path = Path(text)
    if len(os.fsencode(path.name)) > NAME_MAX:
        raise argparse.ArgumentTypeError(f"file name longer than {NAME_MAX} bytes; give a shorter one")
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"cannot write {text}: {exc.strerror}") from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise argparse.ArgumentTypeError(f"{text} is a directory; give a file path")
        if not stat.S_ISREG(st.st_mode):
            raise argparse.ArgumentTypeError(
                f"{text} is not a regular file (a FIFO or device); give a file path, or - for stdout"
            )
        try:  # no O_CREAT, no O_TRUNC: proves we may write without touching the file
            os.close(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK))
        except OSError as exc:
            raise argparse.ArgumentTypeError(f"cannot write {text}: {exc.strerror}") from None
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise argparse.ArgumentTypeError(f"folder {parent} does not exist; create it first")
    try:  # the report is written as a temp file in this folder, then renamed: prove that works, leave nothing
        fd, probe = tempfile.mkstemp(prefix=".envcheck-probe-", dir=parent)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"cannot write {text}: {exc.strerror} in {parent}") from None
    return text


def output_dir(text: str) -> str:
    """argparse type for bench --plots: a folder that exists and is writable, or can be created (nothing is
    created here)."""
    if not text:
        raise argparse.ArgumentTypeError("'' is not a folder; give e.g. plots/")
    path = Path(text)
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise argparse.ArgumentTypeError(f"{existing} is not a folder; give a folder path for the plots")
    if not os.access(existing, os.W_OK | os.X_OK) or os.statvfs(existing).f_flag & os.ST_RDONLY:
        raise argparse.ArgumentTypeError(f"cannot write in {existing}")
    return text


DURATION_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
DURATION_MAX_S = 7 * 86400.0


def duration(text: str) -> float:
    """argparse type for --budget: seconds ('90', '90s'), minutes ('15m'), hours ('4h') or a sum of them ('1h30m');
    at least 1 s, at most 7 days."""
    spec = text.strip().lower()
    try:
        seconds = float(spec)
    except ValueError:
        parts = _DURATION_PART.findall(spec)
        if not parts or "".join(a + b for a, b in parts) != spec:
            raise argparse.ArgumentTypeError(
                f"{text[:40]!r} is not a duration; give e.g. 90s, 15m, 4h or 1h30m"
            ) from None
        seconds = sum(float(n) * DURATION_UNITS[u] for n, u in parts)
    if not math.isfinite(seconds) or not 1.0 <= seconds <= DURATION_MAX_S:
        raise argparse.ArgumentTypeError(f"{text[:40]}: give a duration from 1s to 7d")
    return seconds
