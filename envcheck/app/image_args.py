"""What `envcheck image ...` and `envcheck matrix ...` share: their common flags and what those flags select.

The three image front doors import this module and never each other's private names (images.py registers,
image_commands.py and image_publish.py act), so no import circle runs among them.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from envcheck.app.args import names, output_path, positive_float
from envcheck.core.errors import UsageError
from envcheck.images.docker_run import RunOptions
from envcheck.images.matrix import Matrix, default_matrix_path, load_matrix
from envcheck.images.matrix_rules import TARGETS

Handler = Callable[[argparse.Namespace], int]


def matrix_arg(parser: argparse.ArgumentParser) -> None:
    """--matrix and --repo."""
    parser.add_argument(
        "--matrix", type=Path, help="matrix file (default: ENVCHECK_MATRIX, else the matrix envcheck ships)"
    )
    parser.add_argument("--repo", default="envcheck", help="image repository name (default: envcheck)")


def row_target_args(parser: argparse.ArgumentParser) -> None:
    """--row and --target."""
    parser.add_argument("--row", metavar="ID", help="one row id (see `envcheck matrix list`)")
    parser.add_argument("--target", choices=TARGETS, help="one Dockerfile target")


def verify_args(parser: argparse.ArgumentParser) -> None:
    """The flags of a run of envcheck inside an image."""
    parser.add_argument("--allow-cpu", action="store_true", help="no GPU request; GPU checks skip")
    parser.add_argument(
        "--timeout",
        type=positive_float,
        default=900.0,
        metavar="S",
        help="per-container limit in seconds; the container is killed after it (default 900)",
    )
    parser.add_argument("--shm-size", default="8g", help="container /dev/shm size (default 8g)")
    parser.add_argument("--ipc-host", action="store_true", help="share the host IPC namespace instead")
    parser.add_argument("--level", choices=["quick", "full"], default="quick")
    parser.add_argument("--only", type=names, metavar="NAMES", help="comma-separated checks to run inside")
    parser.add_argument("--skip", type=names, metavar="NAMES", help="comma-separated checks to leave out")
    parser.add_argument(
        "--json", type=output_path, metavar="PATH", help="aggregate JSON report ('-' = stdout)"
    )
    parser.add_argument(
        "--junit", type=output_path, metavar="PATH", help="aggregate JUnit XML (one suite per image)"
    )


def needs_subcommand(parser: argparse.ArgumentParser, choices: str) -> Handler:
    """The handler of a command given without its subcommand: a usage error naming the choices."""

    def call(args: argparse.Namespace) -> int:
        raise UsageError(f"`{parser.prog}` needs a subcommand: {choices}")

    return call


def selected_matrix(args: argparse.Namespace) -> Matrix:
    """The matrix named by --matrix, ENVCHECK_MATRIX or the repository default."""
    return load_matrix(args.matrix or default_matrix_path())


def run_options(args: argparse.Namespace) -> RunOptions:
    """Container settings from the shared verify flags."""
    if args.timeout <= 0:
        raise UsageError("--timeout must be positive")
    inner = ["--level", args.level]
    if args.only:
        inner += ["--only", args.only]
    if args.skip:
        inner += ["--skip", args.skip]
    return RunOptions(
        allow_cpu=args.allow_cpu,
        timeout_s=args.timeout,
        ipc_host=args.ipc_host,
        shm_size=args.shm_size,
        envcheck_args=tuple(inner),
    )
