"""The command line: parse arguments, call core, render, return an exit code."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from envcheck import __version__
from envcheck.cluster.mode import add_arguments as add_cluster_arguments
from envcheck.core.check import MEMORY_FRACTION
from envcheck.core.runner import Interrupted, interruptible
from envcheck.errors import FatalError, UsageError

# Subcommands that live in their own packages; each module exposes register(subparsers).
PLUGIN_COMMANDS = ("envcheck.bench.cli", "envcheck.images.cli", "envcheck.host", "envcheck.explain.cli")
SUBCOMMANDS = ("run", "list", "facts", "bench", "image", "matrix", "host", "explain")


class Parser(argparse.ArgumentParser):
    """argparse that raises instead of printing usage and exiting, so errors stay one line (every front door
    uses it, with the argument types below and `guard`)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{message} (try `{self.prog} --help`)")


def positive_float(text: str) -> float:
    """argparse type for --timeout."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def non_negative_int(text: str) -> int:
    """argparse type for GPU and rank counts."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 0")
    return int(text)


def output_path(text: str) -> str:
    """argparse type for --json/--junit: '-' or a path whose folder exists and is writable."""
    if text == "-":
        return text
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a directory; give a file path")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise argparse.ArgumentTypeError(f"folder {parent} does not exist; create it first")
    try:
        with open(path, "a"):
            pass
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"cannot write {text}: {exc.strerror}") from None
    return text


def add_shared_run_arguments(parser: argparse.ArgumentParser, *, timeout_default: float | None = None,
                             timeout_help: str = "cap the whole run", check_outputs: bool = True) -> None:
    """The run flags `envcheck run` and the torchrun entry (`python -m envcheck.distributed`) share, declared
    once: --level, --allow-cpu, --json, --junit, --timeout, --min-busbw, --strict-perf.

    Where the torchrun entry differs it says so: its `--timeout` is how long a rank may make no progress
    (and the process-group timeout), not a cap on the whole run (`timeout_default`, `timeout_help`); and it
    passes `check_outputs=False`, since `output_path` creates the file and only rank 0 may write it."""
    parser.add_argument("--level", choices=["quick", "full"], default="quick",
                        help="quick (default) or full (adds the slower checks, e.g. the dist.busbw sweep)")
    parser.add_argument("--allow-cpu", action="store_true",
                        help="no GPU is fine: GPU checks skip, cuda.available warns, distributed checks use gloo")
    out = output_path if check_outputs else str
    parser.add_argument("--json", type=out, metavar="PATH", help="write JSON ('-' = stdout only)")
    parser.add_argument("--junit", type=out, metavar="PATH", help="write JUnit XML")
    parser.add_argument("--timeout", type=positive_float, default=timeout_default, metavar="SECONDS",
                        help=timeout_help)
    parser.add_argument("--min-busbw", type=positive_float, metavar="GBPS",
                        help="warn when all-reduce bus bandwidth is below this")
    parser.add_argument("--strict-perf", action="store_true", help="make --min-busbw a failure, not a warning")


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `envcheck run`: the shared run flags, plus selection and the single-node settings."""
    add_shared_run_arguments(parser)
    parser.add_argument("--only", metavar="NAMES", help="comma-separated check names to run")
    parser.add_argument("--skip", metavar="NAMES", help="comma-separated check names to leave out")
    parser.add_argument("--expect-gpus", type=non_negative_int, metavar="N", help="fail unless N GPUs are visible")
    parser.add_argument("--cpu-ranks", type=non_negative_int, default=2, metavar="N",
                        help="gloo ranks for the CPU distributed check (default 2)")
    parser.add_argument("--memory-fraction", type=positive_float, default=MEMORY_FRACTION, metavar="F",
                        help="fraction of each GPU's memory cuda.devices allocates (default %(default)s)")


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, plugins included."""
    parser = Parser(prog="envcheck", description="Prove that this PyTorch + CUDA environment works.")
    parser.add_argument("--version", action="version", version=f"envcheck {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=Parser)
    run = sub.add_parser("run", help="run the checks (the default)")
    add_run_arguments(run)
    add_cluster_arguments(run)
    run.set_defaults(handler=_handler("envcheck.commands", "cmd_run"))
    listing = sub.add_parser("list", help="list every check with its level and needs")
    listing.set_defaults(handler=_handler("envcheck.commands", "cmd_list"))
    facts = sub.add_parser("facts", help="print the environment facts")
    facts.add_argument("--json", type=output_path, metavar="PATH", help="write JSON ('-' = stdout only)")
    facts.add_argument("--timeout", type=positive_float, default=60.0, metavar="SECONDS")
    facts.add_argument("--bundle", type=output_path, metavar="FILE", help="write a bundle for `envcheck explain`")
    facts.set_defaults(handler=_handler("envcheck.commands", "cmd_facts"))
    for module in PLUGIN_COMMANDS:
        importlib.import_module(module).register(sub)
    return parser


def _handler(module: str, name: str) -> Callable[[argparse.Namespace], int]:
    def call(args: argparse.Namespace) -> int:
        fn: Callable[[argparse.Namespace], int] = getattr(importlib.import_module(module), name)
        return fn(args)

    return call


def write_output(path: str, text: str) -> None:
    """Write a report to a path, or to stdout for '-'."""
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)


def guard(call: Callable[[], int], prog: str = "envcheck", signals: bool = True) -> int:
    """The one error handler of every front door: a FatalError is one line and its exit code, Ctrl-C is 130,
    SIGTERM/SIGHUP are 128 + the signal (and kill every worker on the way out); never a traceback for these.
    `signals=False` leaves SIGTERM/SIGHUP as they are (a torchrun rank: torchrun's own teardown sends them)."""
    try:
        with interruptible() if signals else contextlib.nullcontext():
            return int(call())
    except FatalError as exc:
        print(f"{prog}: error: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except Interrupted as exc:
        print(f"{prog}: stopped by {signal.Signals(exc.signum).name}", file=sys.stderr)
        return exc.exit_code


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: returns the exit code (0 ok, 1 check failed, 2 bad input, 130 Ctrl-C, 143 SIGTERM)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if not args_list or (args_list[0].startswith("-") and args_list[0] not in ("-h", "--help", "--version")):
        args_list.insert(0, "run")

    def call() -> int:
        args = build_parser().parse_args(args_list)
        handler = getattr(args, "handler", None)
        if handler is None:
            raise UsageError(f"no command given; choose one of {', '.join(SUBCOMMANDS)}")
        return int(handler(args))

    return guard(call)
