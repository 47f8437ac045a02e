"""What `envcheck image ...` / `envcheck matrix verify` do once parsed (imported only when used); the host work
itself (Docker, pip, git) lives in `envcheck.images`."""

from __future__ import annotations

import sys

from rich.console import Console

from envcheck.app.image_args import (
    ImageBuildRequest,
    ImageVerifyRequest,
    MatrixVerifyRequest,
    RowsRequest,
    VerifyFlags,
    WheelhouseRequest,
    run_options,
    selected_matrix,
)
from envcheck.app.output import write_output
from envcheck.core.errors import ExitCode, FatalError, UsageError
from envcheck.images import build as builder
from envcheck.images import wheelhouse
from envcheck.images.docker_run import ImageRun, run_in_image
from envcheck.images.engine import connect, has_image
from envcheck.images.matrix import Matrix, Row
from envcheck.images.verify import aggregate_json, aggregate_junit, overall_exit_code, print_matrix


def verify_images(images: list[str], request: VerifyFlags) -> int:
    """Run envcheck in each image, render the matrix, write reports; exit 0 only if all pass."""
    options = run_options(request)
    client = connect()
    console = Console(stderr=request.json == "-", highlight=False)
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
    if request.json:
        write_output(request.json, aggregate_json(runs))
    if request.junit:
        write_output(request.junit, aggregate_junit(runs))
    return overall_exit_code(runs)


def cmd_image_verify(request: ImageVerifyRequest) -> int:
    """`envcheck image verify IMAGE...`."""
    return verify_images(list(request.images), request)


def selected_pairs(matrix: Matrix, request: RowsRequest) -> list[tuple[Row, str]]:
    """(row, target) pairs chosen by --row/--target (all when neither is given)."""
    rows = [matrix.row(request.row)] if request.row else list(matrix.rows)
    pairs = [(r, t) for r in rows for t in r.targets if not request.target or t == request.target]
    if not pairs:
        raise UsageError(
            f"no (row, target) in {matrix.path} matches --row {request.row} --target {request.target}"
        )
    return pairs


def cmd_matrix_verify(request: MatrixVerifyRequest) -> int:
    """`envcheck matrix verify`: every built image of the selected rows/targets."""
    matrix = selected_matrix(request)
    refs = [f"{request.repo}:{row.tags(t)[0]}" for row, t in selected_pairs(matrix, request)]
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
    if len(built) < len(refs) and (request.row or request.target):
        missing = ", ".join(r for r in refs if r not in built)
        raise FatalError(f"not built: {missing}; run `make image ROW=<row> TARGET=<target>`", ExitCode.USAGE)
    return verify_images(built, request)


def cmd_image_build(request: ImageBuildRequest) -> int:
    """`envcheck image build --row ID --target T` (or --all)."""
    matrix = selected_matrix(request)
    if not request.all and not request.row:
        raise UsageError("give --row ID (see `envcheck matrix list`) or --all")
    pairs = (
        selected_pairs(matrix, request)
        if not request.all
        else [(r, t) for r in matrix.rows for t in r.targets]
    )
    for row, target in pairs:
        req = builder.BuildRequest(
            row=row,
            target=target or "runtime",
            repo=request.repo,
            base_image=request.base_image,
            offline=request.offline,
            ca_bundle=request.ca_bundle,
            network=request.network,
            installer=request.installer,
            vcs_ref=builder.vcs_ref(),
            wheelhouse_image=wheelhouse.for_build(row, request.offline),
        )
        print(f"built {builder.run_build(req)}", flush=True)
    return ExitCode.OK


def cmd_image_wheelhouse(request: WheelhouseRequest) -> int:
    """`envcheck image wheelhouse --row ID`: download once, build offline forever."""
    row = selected_matrix(request).row(request.row)
    dest = request.dest or builder.WHEELHOUSE
    wheelhouse.download(row, dest, devel=not request.no_devel)
    image = wheelhouse.pack(row, dest)
    print(f"wheels for {row.id} are in {dest} and in the image {image}")
    return ExitCode.OK
