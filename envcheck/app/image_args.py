"""What `envcheck image ...` and `envcheck matrix ...` share: their common flags, the requests of the image and matrix
commands they make up, and what those flags select.

The three image front doors import this module and never each other's private names (images.py registers,
image_commands.py and image_publish.py act), so no import circle runs among them.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from envcheck.app.args import names, output_path, positive_float
from envcheck.app.requests import Handler, Request
from envcheck.core.errors import UsageError
from envcheck.images.matrix_rules import TARGETS

if TYPE_CHECKING:
    from envcheck.images.docker_run import RunOptions
    from envcheck.images.matrix import Matrix


@dataclass(frozen=True, kw_only=True)
class MatrixRequest(Request):
    """--matrix and --repo (matrix_arg): `envcheck matrix list`."""

    matrix: Path | None
    repo: str


@dataclass(frozen=True, kw_only=True)
class PinsRequest(MatrixRequest):
    """`envcheck matrix pins`: one row (default: the latest)."""

    row: str | None


@dataclass(frozen=True, kw_only=True)
class RowsRequest(MatrixRequest):
    """The matrix flags with --row and --target (row_target_args): `envcheck matrix github`."""

    row: str | None
    target: str | None


@dataclass(frozen=True, kw_only=True)
class GithubRequest(RowsRequest):
    """`envcheck matrix github [--per-platform]`."""

    per_platform: bool


@dataclass(frozen=True, kw_only=True)
class SbomRequest(RowsRequest):
    """`envcheck image sbom IMAGE --out FILE [--record FILE --row ID --target T]`."""

    image: str
    out: Path
    record: Path | None


@dataclass(frozen=True, kw_only=True)
class VerifyFlags(Request):
    """The flags of a run of envcheck inside an image (verify_args)."""

    allow_cpu: bool
    timeout: float
    shm_size: str
    ipc_host: bool
    level: str
    only: str | None
    skip: str | None
    json: str | None
    junit: str | None

    def outputs(self) -> dict[str, str | None]:
        """--json and --junit."""
        return {"--json": self.json, "--junit": self.junit}


@dataclass(frozen=True, kw_only=True)
class ImageVerifyRequest(VerifyFlags):
    """`envcheck image verify IMAGE...`."""

    images: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class MatrixVerifyRequest(RowsRequest, VerifyFlags):
    """`envcheck matrix verify`: the built images of the selected rows and targets."""


@dataclass(frozen=True, kw_only=True)
class ImageBuildRequest(RowsRequest):
    """`envcheck image build`."""

    all: bool
    base_image: str | None
    offline: bool
    ca_bundle: Path | None
    network: str | None
    installer: str


@dataclass(frozen=True, kw_only=True)
class WheelhouseRequest(MatrixRequest):
    """`envcheck image wheelhouse --row ID`."""

    row: str
    dest: Path | None
    no_devel: bool


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


def needs_subcommand(parser: argparse.ArgumentParser, choices: str) -> Handler[Request]:
    """The handler of a command given without its subcommand: a usage error naming the choices."""

    def call(request: Request) -> int:
        raise UsageError(f"`{parser.prog}` needs a subcommand: {choices}")

    return Handler(Request, call)


def selected_matrix(request: MatrixRequest) -> Matrix:
    """The matrix named by --matrix, ENVCHECK_MATRIX or the repository default."""
    from envcheck.images.matrix import default_matrix_path, load_matrix

    return load_matrix(request.matrix or default_matrix_path())


def run_options(request: VerifyFlags) -> RunOptions:
    """Container settings from the shared verify flags."""
    from envcheck.images.docker_run import RunOptions

    if request.timeout <= 0:
        raise UsageError("--timeout must be positive")
    inner = ["--level", request.level]
    if request.only:
        inner += ["--only", request.only]
    if request.skip:
        inner += ["--skip", request.skip]
    return RunOptions(
        allow_cpu=request.allow_cpu,
        timeout_s=request.timeout,
        ipc_host=request.ipc_host,
        shm_size=request.shm_size,
        envcheck_args=tuple(inner),
    )
