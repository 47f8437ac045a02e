"""`envcheck image ...` and `envcheck matrix ...`: thin argument parsing over matrix, build and verify."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from envcheck.app.image_args import (
    GithubRequest,
    ImageBuildRequest,
    ImageVerifyRequest,
    MatrixRequest,
    MatrixVerifyRequest,
    PinsRequest,
    SbomRequest,
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
    github.add_argument(
        "--per-platform", action="store_true", help="one entry per platform too (platform, arch, runner)"
    )
    github.set_defaults(handler=Handler(GithubRequest, cmd_matrix_github))
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
    sbom = isub.add_parser(
        "sbom",
        help="write IMAGE's SBOM (SPDX JSON, by syft, offline); --record adds it to the contents table",
    )
    sbom.add_argument("image", metavar="IMAGE")
    sbom.add_argument("--out", type=Path, required=True, metavar="FILE", help="where the SPDX JSON goes")
    matrix_arg(sbom)
    row_target_args(sbom)
    sbom.add_argument(
        "--record",
        type=Path,
        metavar="FILE",
        help="also record sizes and SBOM figures (needs --row, --target)",
    )
    sbom.set_defaults(handler=Handler(SbomRequest, cmd_image_sbom))
    register_publish(isub)
    image.set_defaults(handler=needs_subcommand(image, "verify, build, wheelhouse, sbom, publish"))


def cmd_image_sbom(request: SbomRequest) -> int:
    """`envcheck image sbom`: the SBOM, and with --record the image's line of the contents table."""
    from envcheck.images.contents import make_record, save_record
    from envcheck.images.sbom import find_syft, make_sbom, summarize

    if request.record and not (request.row and request.target):
        raise UsageError("--record needs --row and --target (the matrix row and target IMAGE was built from)")
    row = selected_matrix(request).row(request.row) if request.record and request.row else None
    doc = make_sbom(request.image, request.out, find_syft())
    figures = summarize(doc)
    print(
        f"wrote {request.out}: {figures['format']} by {figures['generator']}, packages {figures['packages']}"
    )
    if row is not None and request.record and request.target:
        save_record(request.record, make_record(row, request.target, request.image, doc))
        print(f"recorded {request.image} in {request.record}")
    return ExitCode.OK


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
    cols = (
        "row",
        "torch",
        "torchvision",
        "torchaudio",
        "cuda",
        "python",
        "platforms",
        "index",
        "tags (runtime)",
    )
    for col in cols:
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
            ", ".join(p.removeprefix("linux/") for p in row.platforms),
            row.index_url,
            tags,
        )
    Console(highlight=False, width=200 if not sys.stdout.isatty() else None).print(table)
    return ExitCode.OK


def cmd_matrix_github(request: GithubRequest) -> int:
    """Print the GitHub Actions matrix as one line of JSON, nothing else."""
    matrix = selected_matrix(request)
    doc = github_matrix(matrix, row_id=request.row, target=request.target, per_platform=request.per_platform)
    print(json.dumps(doc, separators=(",", ":")))
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
