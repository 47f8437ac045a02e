"""What `envcheck image ...` / `envcheck matrix verify` do once parsed (imported only when used); the host work
itself (Docker, pip, git) lives in `envcheck.images`."""

from __future__ import annotations

import argparse
import sys

from rich.console import Console

from envcheck.app.image_args import run_options, selected_matrix
from envcheck.app.output import write_output
from envcheck.core.errors import ExitCode, FatalError, UsageError
from envcheck.images import build as builder
from envcheck.images import wheelhouse
from envcheck.images.docker_run import ImageRun, run_in_image
from envcheck.images.engine import connect, has_image
from envcheck.images.matrix import Matrix, Row
from envcheck.images.verify import aggregate_json, aggregate_junit, overall_exit_code, print_matrix


def verify_images(images: list[str], args: argparse.Namespace) -> int:
    """Run envcheck in each image, render the matrix, write reports; exit 0 only if all pass."""
    options = run_options(args)
    client = connect()
    console = Console(stderr=args.json == "-", highlight=False)
    runs: list[ImageRun] = []
    try:
        for image in images:
            console.print(f"[b]{image}[/b]: running envcheck (timeout {options.timeout_s:g}s)")
            runs.append(run_in_image(client, image, options))
    finally:
        client.close()
    print_matrix(runs, console)
    for run in runs:
        for note in run.notes:
            console.print(f"[yellow]{run.image}: note: {note}[/yellow]")
        if run.error:
            print(f"envcheck: error: {run.image}: {run.error}", file=sys.stderr)
    if args.json:
        write_output(args.json, aggregate_json(runs))
    if args.junit:
        write_output(args.junit, aggregate_junit(runs))
    return overall_exit_code(runs)


def cmd_image_verify(args: argparse.Namespace) -> int:
    """`envcheck image verify IMAGE...`."""
    return verify_images(list(args.images), args)


def selected_pairs(matrix: Matrix, args: argparse.Namespace) -> list[tuple[Row, str]]:
    """(row, target) pairs chosen by --row/--target (all when neither is given)."""
    rows = [matrix.row(args.row)] if args.row else list(matrix.rows)
    pairs = [(r, t) for r in rows for t in r.targets if not args.target or t == args.target]
    if not pairs:
        raise UsageError(f"no (row, target) in {matrix.path} matches --row {args.row} --target {args.target}")
    return pairs


def cmd_matrix_verify(args: argparse.Namespace) -> int:
    """`envcheck matrix verify`: every built image of the selected rows/targets."""
    matrix = selected_matrix(args)
    refs = [f"{args.repo}:{row.tags(t)[0]}" for row, t in selected_pairs(matrix, args)]
    client = connect()
    try:
        built = [ref for ref in refs if has_image(client, ref)]
    finally:
        client.close()
    if not built:
        raise FatalError(
            f"none of the {len(refs)} matrix images is built; run `make image ROW=<row>` (e.g. {refs[0]})",
            ExitCode.USAGE,
        )
    if len(built) < len(refs) and (args.row or args.target):
        missing = ", ".join(r for r in refs if r not in built)
        raise FatalError(f"not built: {missing}; run `make image ROW=<row> TARGET=<target>`", ExitCode.USAGE)
    return verify_images(built, args)


def cmd_image_build(args: argparse.Namespace) -> int:
    """`envcheck image build --row ID --target T` (or --all)."""
    matrix = selected_matrix(args)
    if not args.all and not args.row:
        raise UsageError("give --row ID (see `envcheck matrix list`) or --all")
    pairs = selected_pairs(matrix, args) if not args.all else [(r, t) for r in matrix.rows for t in r.targets]
    for row, target in pairs:
        req = builder.BuildRequest(
            row=row,
            target=target or "runtime",
            repo=args.repo,
            base_image=args.base_image,
            offline=args.offline,
            ca_bundle=args.ca_bundle,
            network=args.network,
            installer=args.installer,
            vcs_ref=builder.vcs_ref(),
            wheelhouse_image=wheelhouse.for_build(row, args.offline),
        )
        print(f"built {builder.run_build(req)}", flush=True)
    return ExitCode.OK


def cmd_image_wheelhouse(args: argparse.Namespace) -> int:
    """`envcheck image wheelhouse --row ID`: download once, build offline forever."""
    row = selected_matrix(args).row(args.row)
    dest = args.dest or builder.WHEELHOUSE
    wheelhouse.download(row, dest, devel=not args.no_devel)
    image = wheelhouse.pack(row, dest)
    print(f"wheels for {row.id} are in {dest} and in the image {image}")
    return ExitCode.OK
