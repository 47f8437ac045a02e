"""`envcheck image ...` and `envcheck matrix ...`: thin argument parsing over matrix, build and verify."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from envcheck.app.args import names, output_path, positive_float
from envcheck.core.errors import UsageError
from envcheck.images.matrix import Matrix, default_matrix_path, github_matrix, load_matrix
from envcheck.images.matrix_rules import TARGETS


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `image` and `matrix` subcommands."""
    matrix = sub.add_parser("matrix", help="the image version matrix (docker/matrix.toml)")
    msub = matrix.add_subparsers(dest="matrix_command", parser_class=type(matrix))
    listing = msub.add_parser("list", help="print every row and its tags")
    _matrix_arg(listing)
    listing.set_defaults(handler=cmd_matrix_list)
    github = msub.add_parser("github", help="print the GitHub Actions matrix JSON (one line)")
    _matrix_arg(github)
    _row_target_args(github)
    github.set_defaults(handler=cmd_matrix_github)
    pins = msub.add_parser("pins", help="print a row's pip arguments (default: the latest row)")
    _matrix_arg(pins)
    pins.add_argument("--row", metavar="ID", help="row id (default: the row marked latest)")
    pins.set_defaults(handler=cmd_matrix_pins)
    mverify = msub.add_parser("verify", help="run envcheck inside every built image of the matrix")
    _matrix_arg(mverify)
    _row_target_args(mverify)
    _verify_args(mverify)
    mverify.set_defaults(handler=_lazy("envcheck.app.image_commands", "cmd_matrix_verify"))
    matrix.set_defaults(handler=_missing(matrix, "list, github, pins, verify"))

    image = sub.add_parser("image", help="build images and run envcheck inside them")
    isub = image.add_subparsers(dest="image_command", parser_class=type(image))
    verify = isub.add_parser("verify", help="run envcheck inside each IMAGE through the Docker SDK")
    verify.add_argument("images", nargs="+", metavar="IMAGE")
    _verify_args(verify)
    verify.set_defaults(handler=_lazy("envcheck.app.image_commands", "cmd_image_verify"))
    build = isub.add_parser("build", help="docker build one matrix row and target (or --all)")
    _matrix_arg(build)
    _row_target_args(build)
    build.add_argument("--all", action="store_true", help="every row and target of the matrix")
    build.add_argument("--base-image", help="override the row's BASE_IMAGE (any apt-based image)")
    build.add_argument("--offline", action="store_true", help="install only from .wheelhouse/ (--no-index)")
    build.add_argument("--ca-bundle", type=Path, help="extra CA bundle, passed as a BuildKit secret")
    build.add_argument("--network", help="docker build --network (e.g. none, to prove --offline)")
    build.add_argument("--installer", choices=["pip", "uv"], default="pip")
    build.set_defaults(handler=_lazy("envcheck.app.image_commands", "cmd_image_build"))
    wheels = isub.add_parser("wheelhouse", help="pip download a row's wheels into .wheelhouse/")
    _matrix_arg(wheels)
    wheels.add_argument("--row", required=True)
    wheels.add_argument("--dest", type=Path, help="default: .wheelhouse/ in the repository")
    wheels.add_argument("--no-devel", action="store_true", help="skip nvcc (devel target) wheels")
    wheels.set_defaults(handler=_lazy("envcheck.app.image_commands", "cmd_image_wheelhouse"))
    from envcheck.app.image_publish import register as register_publish

    register_publish(isub)
    image.set_defaults(handler=_missing(image, "verify, build, wheelhouse, publish"))


def _matrix_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--matrix", type=Path, help="matrix file (default: ENVCHECK_MATRIX or docker/matrix.toml)")
    parser.add_argument("--repo", default="envcheck", help="image repository name (default: envcheck)")


def _row_target_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--row", metavar="ID", help="one row id (see `envcheck matrix list`)")
    parser.add_argument("--target", choices=TARGETS, help="one Dockerfile target")


def _verify_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--allow-cpu", action="store_true", help="no GPU request; GPU checks skip")
    parser.add_argument("--timeout", type=positive_float, default=900.0, metavar="S",
                        help="per-container limit in seconds; the container is killed after it (default 900)")
    parser.add_argument("--shm-size", default="8g", help="container /dev/shm size (default 8g)")
    parser.add_argument("--ipc-host", action="store_true", help="share the host IPC namespace instead")
    parser.add_argument("--level", choices=["quick", "full"], default="quick")
    parser.add_argument("--only", type=names, metavar="NAMES", help="comma-separated checks to run inside")
    parser.add_argument("--skip", type=names, metavar="NAMES", help="comma-separated checks to leave out")
    parser.add_argument("--json", type=output_path, metavar="PATH", help="aggregate JSON report ('-' = stdout)")
    parser.add_argument("--junit", type=output_path, metavar="PATH", help="aggregate JUnit XML (one suite per image)")


def _lazy(module: str, name: str):  # type: ignore[no-untyped-def]
    def call(args: argparse.Namespace) -> int:
        import importlib

        fn = getattr(importlib.import_module(module), name)
        return int(fn(args))

    return call


def _missing(parser: argparse.ArgumentParser, choices: str):  # type: ignore[no-untyped-def]
    def call(args: argparse.Namespace) -> int:
        raise UsageError(f"`{parser.prog}` needs a subcommand: {choices}")

    return call


def selected_matrix(args: argparse.Namespace) -> Matrix:
    """The matrix named by --matrix, ENVCHECK_MATRIX or the repository default."""
    return load_matrix(args.matrix or default_matrix_path())


def cmd_matrix_list(args: argparse.Namespace) -> int:
    """Print rows, pins and tags."""
    from rich.console import Console
    from rich.table import Table

    matrix = selected_matrix(args)
    table = Table(title=f"image matrix ({matrix.path})")
    for col in ("row", "torch", "torchvision", "torchaudio", "cuda", "python", "index", "tags (runtime)"):
        table.add_column(col, overflow="fold")
    for row in matrix.rows:
        tags = ", ".join(row.tags("runtime")) if "runtime" in row.targets else "-"
        table.add_row(row.id, row.torch, row.torchvision, row.torchaudio or "-", row.cuda, row.python,
                      row.index_url, tags)
    Console(highlight=False, width=200 if not sys.stdout.isatty() else None).print(table)
    return 0


def cmd_matrix_github(args: argparse.Namespace) -> int:
    """Print the GitHub Actions matrix as one line of JSON, nothing else."""
    matrix = selected_matrix(args)
    print(json.dumps(github_matrix(matrix, row_id=args.row, target=args.target), separators=(",", ":")))
    return 0


def cmd_matrix_pins(args: argparse.Namespace) -> int:
    """Print `torch==X torchvision==Y [torchaudio==Z] [--index-url URL]` for one row, on one line."""
    matrix = selected_matrix(args)
    if args.row:
        row = matrix.row(args.row)
    else:
        latest = [r for r in matrix.rows if r.latest]
        if not latest:
            raise UsageError(f"{matrix.path}: no row has latest = true; pass --row ID")
        row = latest[0]
    parts = [f"torch=={row.torch}", f"torchvision=={row.torchvision}"]
    if row.torchaudio:
        parts.append(f"torchaudio=={row.torchaudio}")
    if "pypi.org" not in row.index_url:
        parts += ["--index-url", row.index_url]
    print(" ".join(parts))
    return 0
