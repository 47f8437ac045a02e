"""What `envcheck image ...` / `envcheck matrix verify` do once parsed (imported only when used)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import zipfile
from pathlib import Path

from rich.console import Console

from envcheck.app.images import selected_matrix
from envcheck.core.errors import FatalError, UsageError
from envcheck.images import build as builder
from envcheck.images.docker_run import ImageRun, RunOptions, run_in_image
from envcheck.images.engine import connect, docker_binary
from envcheck.images.matrix import Matrix, Row
from envcheck.images.nvcc import nvcc_requirement
from envcheck.images.verify import aggregate_json, aggregate_junit, overall_exit_code, print_matrix


def run_options(args: argparse.Namespace) -> RunOptions:
    """Container settings from the shared verify flags."""
    if args.timeout <= 0:
        raise UsageError("--timeout must be positive")
    inner = ["--level", args.level]
    if args.only:
        inner += ["--only", args.only]
    if args.skip:
        inner += ["--skip", args.skip]
    return RunOptions(allow_cpu=args.allow_cpu, timeout_s=args.timeout, ipc_host=args.ipc_host,
                      shm_size=args.shm_size, envcheck_args=tuple(inner))


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
        _write(args.json, aggregate_json(runs))
    if args.junit:
        _write(args.junit, aggregate_junit(runs))
    return overall_exit_code(runs)


def _write(path: str, text: str) -> None:
    """The one report writer (atomic; a failure is one line and exit 3)."""
    from envcheck.app.output import write_output

    write_output(path, text)


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
        built = [ref for ref in refs if _exists(client, ref)]
    finally:
        client.close()
    if not built:
        raise FatalError(f"none of the {len(refs)} matrix images is built; run `make image ROW=<row>` "
                         f"(e.g. {refs[0]})", 2)
    if len(built) < len(refs) and (args.row or args.target):
        missing = ", ".join(r for r in refs if r not in built)
        raise FatalError(f"not built: {missing}; run `make image ROW=<row> TARGET=<target>`", 2)
    return verify_images(built, args)


def _exists(client: object, ref: str) -> bool:
    try:
        client.images.get(ref)  # type: ignore[attr-defined]
    except Exception:
        return False
    return True


def cmd_image_build(args: argparse.Namespace) -> int:
    """`envcheck image build --row ID --target T` (or --all)."""
    matrix = selected_matrix(args)
    if not args.all and not args.row:
        raise UsageError("give --row ID (see `envcheck matrix list`) or --all")
    pairs = selected_pairs(matrix, args) if not args.all else [(r, t) for r in matrix.rows for t in r.targets]
    for row, target in pairs:
        req = builder.BuildRequest(row=row, target=target or "runtime", repo=args.repo,
                                   base_image=args.base_image, offline=args.offline, ca_bundle=args.ca_bundle,
                                   network=args.network, installer=args.installer, vcs_ref=_git_ref(),
                                   wheelhouse_image=_wheelhouse_for(row, args.offline))
        print(f"built {builder.run_build(req)}", flush=True)
    return 0


def _wheelhouse_for(row: Row, offline: bool) -> str | None:
    """The row's wheelhouse image when it exists (always used if present; required with --offline)."""
    ref = builder.wheelhouse_image(row)
    done = subprocess.run([docker_binary(), "image", "inspect", ref], capture_output=True,
                          timeout=60, check=False)
    if done.returncode == 0:
        return ref
    if offline:
        raise UsageError(f"--offline needs the wheelhouse image {ref}; run `make wheelhouse ROW={row.id}`")
    return None


def _git_ref() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             timeout=10, cwd=builder.REPO_ROOT, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return out.stdout.strip() or "unknown"


def cmd_image_wheelhouse(args: argparse.Namespace) -> int:
    """`envcheck image wheelhouse --row ID`: download once, build offline forever."""
    row = selected_matrix(args).row(args.row)
    dest = args.dest or builder.WHEELHOUSE
    dest.mkdir(parents=True, exist_ok=True)
    _pip(builder.wheelhouse_command(row, dest, []))
    _pip(builder.deps_download_command(row, dest))
    if not args.no_devel:
        _pip(builder.wheelhouse_command(row, dest, [nvcc_requirement(_torch_requires(dest, row), row.cuda)]))
    build_wheelhouse_image(row, dest)
    print(f"wheels for {row.id} are in {dest} and in the image {builder.wheelhouse_image(row)}")
    return 0


def build_wheelhouse_image(row: Row, dest: Path) -> str:
    """Pack the wheels in `dest` into envcheck-wheelhouse:<row> (the build mounts it for OFFLINE builds)."""
    env = {**os.environ, "DOCKER_BUILDKIT": "1"}
    try:
        done = subprocess.run(builder.wheelhouse_image_command(row, dest), input=builder.WHEELHOUSE_DOCKERFILE,
                              text=True, env=env, timeout=3600, check=False)
    except subprocess.TimeoutExpired:
        raise FatalError("building the wheelhouse image took over an hour and was stopped", 1) from None
    if done.returncode != 0:
        raise FatalError(f"building {builder.wheelhouse_image(row)} failed (exit {done.returncode})", 1)
    return builder.wheelhouse_image(row)


def _pip(cmd: list[str]) -> None:
    try:
        done = subprocess.run(cmd, timeout=3600, check=False, env=os.environ)
    except subprocess.TimeoutExpired:
        raise FatalError("pip download took over an hour and was stopped", 1) from None
    if done.returncode != 0:
        raise FatalError(f"pip download failed (exit {done.returncode}); see the output above", 1)


def _torch_requires(dest: Path, row: Row) -> list[str]:
    for wheel in sorted(dest.glob(f"torch-{row.torch}*.whl")):
        with zipfile.ZipFile(wheel) as zf:
            name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
            lines = zf.read(name).decode("utf-8", errors="replace").splitlines()
        return [line.split(":", 1)[1].strip() for line in lines if line.startswith("Requires-Dist:")]
    raise FatalError(f"no torch-{row.torch} wheel in {dest} after download", 1)
