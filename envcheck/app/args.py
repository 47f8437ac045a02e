"""Argument types and the shared flags of every front door: a bad value is one line and exit 2, never a traceback."""

from __future__ import annotations

import argparse
import math
import os
import stat
import tempfile
from pathlib import Path

from envcheck.core.check import MEMORY_FRACTION
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


def rank_count(text: str) -> int:
    """argparse type for --cpu-ranks: 2 to MAX_CPU_RANKS (an all-reduce needs two ranks)."""
    value = non_negative_int(text)
    if value < 2:
        raise argparse.ArgumentTypeError(f"{text}: an all-reduce needs at least 2 ranks (e.g. --cpu-ranks 2)")
    if value > MAX_CPU_RANKS:
        raise argparse.ArgumentTypeError(
            f"{text}: at most {MAX_CPU_RANKS}; each rank is a process forked on this host, and more exhaust the "
            "process and file limits without proving more (test many ranks with torchrun across nodes)"
        )
    return value


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


STDOUT_REPORTS = ("json", "junit", "bundle")


FILE_OUTPUTS = ("json", "junit", "bundle", "prometheus")


def check_stdout(args: argparse.Namespace) -> None:
    """At most one report may go to stdout ('-'), so stdout stays one parseable document; and no two reports
    may name the same file (one would silently replace the other)."""
    dashes = [f"--{name}" for name in STDOUT_REPORTS if getattr(args, name, None) == "-"]
    if len(dashes) > 1:
        raise UsageError(f"{' and '.join(dashes)} both write to stdout; give all but one a file path")
    seen: dict[str, str] = {}
    for name in FILE_OUTPUTS:
        path = getattr(args, name, None)
        if not isinstance(path, str) or path == "-":
            continue
        key = os.path.realpath(path)
        if key in seen:
            raise UsageError(
                f"{seen[key]} and --{name} both name {one_line(path)}; give each report its own file"
            )
        seen[key] = f"--{name}"


def report_on_stdout(args: argparse.Namespace) -> bool:
    """Whether a report goes to stdout (then the table goes to stderr)."""
    return any(getattr(args, name, None) == "-" for name in STDOUT_REPORTS)


def add_shared_run_arguments(
    parser: argparse.ArgumentParser,
    *,
    timeout_default: float | None = None,
    timeout_help: str = "cap the whole run",
    check_outputs: bool = True,
) -> None:
    """The run flags `envcheck run` and the torchrun entry (`python -m envcheck.distributed`) share, declared
    once: --level, --allow-cpu, --json, --junit, --timeout, --min-busbw, --min-busbw-at, --strict-perf.

    Where the torchrun entry differs it says so: its `--timeout` is how long a rank may make no progress
    (and the process-group timeout), not a cap on the whole run (`timeout_default`, `timeout_help`); and it
    passes `check_outputs=False`: only rank 0 writes the reports, so the other ranks must not judge the path."""
    parser.add_argument(
        "--level",
        choices=["quick", "full"],
        default="quick",
        help="quick (default) or full (adds the slower checks, e.g. the dist.busbw sweep)",
    )
    parser.add_argument(
        "--allow-cpu",
        action="store_true",
        help="no GPU is fine: GPU checks skip, cuda.available warns, distributed checks use gloo",
    )
    out = output_path if check_outputs else str
    parser.add_argument("--json", type=out, metavar="PATH", help="write JSON ('-' = stdout only)")
    parser.add_argument("--junit", type=out, metavar="PATH", help="write JUnit XML")
    parser.add_argument(
        "--timeout", type=positive_float, default=timeout_default, metavar="SECONDS", help=timeout_help
    )
    parser.add_argument(
        "--min-busbw",
        type=positive_float,
        metavar="GBPS",
        help="warn when all-reduce bus bandwidth is below this",
    )
    parser.add_argument(
        "--min-busbw-at",
        type=message_size,
        metavar="SIZE",
        help="the all-reduce message size the --min-busbw floor was measured at (e.g. 16G, as "
        "nccl-tests' -b/-e): judged only against a sweep row of that size; default: the peak",
    )
    parser.add_argument(
        "--strict-perf", action="store_true", help="make --min-busbw and perf.relative failures, not warnings"
    )


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `envcheck run`: the shared run flags, plus selection and the single-node settings."""
    add_shared_run_arguments(parser)
    parser.add_argument("--only", type=names, metavar="NAMES", help="comma-separated check names to run")
    parser.add_argument(
        "--skip", type=names, metavar="NAMES", help="comma-separated check names to leave out"
    )
    parser.add_argument(
        "--expect-gpus", type=non_negative_int, metavar="N", help="fail unless N GPUs are visible"
    )
    parser.add_argument(
        "--cpu-ranks",
        type=rank_count,
        default=2,
        metavar="N",
        help="gloo ranks for the CPU distributed check (default 2)",
    )
    from envcheck.cluster.node_profiles import profile_arg

    parser.add_argument(
        "--profile",
        type=profile_arg,
        metavar="FILE|NAME",
        help="what this node type must have (TOML file, or built-in: h100-sxm-8, h200-8, a100-sxm-8, "
        "a100-80gb-sxm-8, l40s, b200-8); --expect-gpus and --min-busbw override its values",
    )
    parser.add_argument(
        "--profile-floors",
        action="store_true",
        help="also apply the profile's absolute performance floors (its busbw floor, at the message "
        "size it states); off by default: perf.relative and envcheck fleet judge without them",
    )
    parser.add_argument(
        "--memory-fraction",
        type=fraction,
        default=MEMORY_FRACTION,
        metavar="F",
        help="fraction of each GPU's memory cuda.devices allocates (default %(default)s)",
    )
    parser.add_argument(
        "--perf-margin",
        type=percent,
        default=10.0,
        metavar="PCT",
        help="perf.relative (--level full): name a GPU or GPU pair more than PCT%% below the node's best "
        "of the same kind (default %(default)g, gpu-fryer's; --strict-perf makes it a failure)",
    )
