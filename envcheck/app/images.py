"""`envcheck image ...` and `envcheck matrix ...`: thin argument parsing over matrix, build and verify."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from envcheck.app.image_args import (
    ImageBuildRequest,
    ImageVerifyRequest,
    MatrixRequest,
    MatrixVerifyRequest,
    PinsRequest,
    RowsRequest,
    WheelhouseRequest,
    matrix_arg,
    needs_subcommand,
    row_target_args,
    selected_matrix,
    verify_args,
)
from envcheck.app.image_publish import register as register_publish
from envcheck.app.requests import Handler
from envcheck.core.errors import ExitCode, UsageError
from envcheck.images.matrix import github_matrix


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `image` and `matrix` subcommands."""
    matrix = sub.add_parser("matrix", help="the image version matrix (docker/matrix.toml)")
    msub = matrix.add_subparsers(dest="matrix_command", parser_class=type(matrix))
    listing = msub.add_parser("list", help="print every row and its tags")
    matrix_arg(listing)
    listing.set_defaults(handler=Handler(MatrixRequest, cmd_matrix_list))
    github = msub.add_parser("github", help="print the GitHub Actions matrix JSON (one line)")
    matrix_arg(github)
    row_target_args(github)
    github.set_defaults(handler=Handler(RowsRequest, cmd_matrix_github))
    pins = msub.add_parser("pins", help="print a row's pip arguments (default: the latest row)")
    matrix_arg(pins)
    pins.add_argument("--row", metavar="ID", help="row id (default: the row marked latest)")
    pins.set_defaults(handler=Handler(PinsRequest, cmd_matrix_pins))
    mverify = msub.add_parser("verify", help="run envcheck inside every built image of the matrix")
    matrix_arg(mverify)
    row_target_args(mverify)
    verify_args(mverify)
    mverify.set_defaults(handler=Handler(MatrixVerifyRequest, cmd_matrix_verify))
    matrix.set_defaults(handler=needs_subcommand(matrix, "list, github, pins, verify"))

    image = sub.add_parser("image", help="build images and run envcheck inside them")
    isub = image.add_subparsers(dest="image_command", parser_class=type(image))
    verify = isub.add_parser("verify", help="run envcheck inside each IMAGE through the Docker SDK")
    verify.add_argument("images", nargs="+", metavar="IMAGE")
    verify_args(verify)
    verify.set_defaults(handler=Handler(ImageVerifyRequest, cmd_image_verify))
    build = isub.add_parser("build", help="docker build one matrix row and target (or --all)")
    matrix_arg(build)
    row_target_args(build)
    build.add_argument("--all", action="store_true", help="every row and target of the matrix")
    build.add_argument("--base-image", help="override the row's BASE_IMAGE (any apt-based image)")
    build.add_argument("--offline", action="store_true", help="install only from .wheelhouse/ (--no-index)")
    build.add_argument("--ca-bundle", type=Path, help="extra CA bundle, passed as a BuildKit secret")
    build.add_argument("--network", help="docker build --network (e.g. none, to prove --offline)")
    build.add_argument("--installer", choices=["pip", "uv"], default="pip")
    build.set_defaults(handler=Handler(ImageBuildRequest, cmd_image_build))
    wheels = isub.add_parser("wheelhouse", help="pip download a row's wheels into .wheelhouse/")
    matrix_arg(wheels)
    wheels.add_argument("--row", required=True)
    wheels.add_argument("--dest", type=Path, help="default: .wheelhouse/ in the repository")
    wheels.add_argument("--no-devel", action="store_true", help="skip nvcc (devel target) wheels")
    wheels.set_defaults(handler=Handler(WheelhouseRequest, cmd_image_wheelhouse))
    register_publish(isub)
    image.set_defaults(handler=needs_subcommand(image, "verify, build, wheelhouse, publish"))


def cmd_matrix_verify(request: MatrixVerifyRequest) -> int:
    """`envcheck matrix verify` (its module, with the Docker SDK's, is imported only when it runs)."""
    from envcheck.app.image_commands import cmd_matrix_verify as run

    return run(request)


def cmd_image_verify(request: ImageVerifyRequest) -> int:
    """`envcheck image verify IMAGE...`."""
    from envcheck.app.image_commands import cmd_image_verify as run

    return run(request)


def cmd_image_build(request: ImageBuildRequest) -> int:
    """`envcheck image build`."""
    from envcheck.app.image_commands import cmd_image_build as run

    return run(request)


def cmd_image_wheelhouse(request: WheelhouseRequest) -> int:
    """`envcheck image wheelhouse`."""
    from envcheck.app.image_commands import cmd_image_wheelhouse as run

    return run(request)


def cmd_matrix_list(request: MatrixRequest) -> int:
    """Print rows, pins and tags."""
    from rich.console import Console
    from rich.table import Table

    matrix = selected_matrix(request)
    table = Table(title=f"image matrix ({matrix.path})")
    for col in ("row", "torch", "torchvision", "torchaudio", "cuda", "python", "index", "tags (runtime)"):
        table.add_column(col, overflow="fold")
    for row in matrix.rows:
        tags = ", ".join(row.tags("runtime")) if "runtime" in row.targets else "-"
        table.add_row(
            row.id,
            row.torch,
            row.torchvision,
            row.torchaudio or "-",
            row.cuda,
            row.python,
            row.index_url,
            tags,
        )
    Console(highlight=False, width=200 if not sys.stdout.isatty() else None).print(table)
    return ExitCode.OK


def cmd_matrix_github(request: RowsRequest) -> int:
    """Print the GitHub Actions matrix as one line of JSON, nothing else."""
    matrix = selected_matrix(request)
    print(json.dumps(github_matrix(matrix, row_id=request.row, target=request.target), separators=(",", ":")))
    return ExitCode.OK


def cmd_matrix_pins(request: PinsRequest) -> int:
    """Print `torch==X torchvision==Y [torchaudio==Z] [--index-url URL]` for one row, on one line."""
    matrix = selected_matrix(request)
    if request.row:
        row = matrix.row(request.row)
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
    return ExitCode.OK
