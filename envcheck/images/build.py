"""`docker build` and `pip download` command lines for a matrix row (BuildKit secrets need the CLI, not the SDK)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from envcheck.core.errors import ExitCode, FatalError
from envcheck.images.engine import docker_binary
from envcheck.images.matrix import Row

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO_ROOT / "docker" / "Dockerfile"
WHEELHOUSE = REPO_ROOT / ".wheelhouse"
DEFAULT_REPO = "envcheck"
BUILD_TIMEOUT_S = 3600.0
UV_VERSION = "0.13.9"  # keep equal to ARG UV_VERSION in docker/Dockerfile


@dataclass(frozen=True)
class BuildRequest:
    """One image to build: a row, a target, and how to reach the wheels."""

    row: Row
    target: str
    repo: str = DEFAULT_REPO
    base_image: str | None = None
    offline: bool = False
    ca_bundle: Path | None = None
    network: str | None = None
    installer: str = "pip"
    vcs_ref: str = "unknown"
    wheelhouse_image: str | None = None
    # The image's created label; None: the build's own time. Two builds of one tree with one date are one cache hit.
    build_date: str | None = None

    def refs(self) -> list[str]:
        """Every name the image gets: repo:full-tag first, then the aliases."""
        return [f"{self.repo}:{tag}" for tag in self.row.tags(self.target)]


def build_command(req: BuildRequest, docker: str | None = None) -> list[str]:
    """The `docker build` argument list (run with DOCKER_BUILDKIT=1)."""
    args = dict(req.row.build_args(req.target))
    if req.base_image:
        args["BASE_IMAGE"] = req.base_image
    args["OFFLINE"] = "1" if req.offline else "0"
    args["WHEELHOUSE_IMAGE"] = req.wheelhouse_image or "scratch"
    args["INSTALLER"] = req.installer
    args["VCS_REF"] = req.vcs_ref
    args["BUILD_DATE"] = req.build_date or datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    cmd = [docker or docker_binary(), "build", "-f", str(DOCKERFILE), "--target", req.target]
    for key, value in args.items():
        cmd += ["--build-arg", f"{key}={value}"]
    if req.ca_bundle is not None:
        if not req.ca_bundle.is_file():
            raise FatalError(
                f"CA bundle {req.ca_bundle} does not exist; pass an existing PEM file", ExitCode.USAGE
            )
        cmd += ["--secret", f"id=ca,src={req.ca_bundle}"]
    if req.network:
        cmd += ["--network", req.network]
    for ref in req.refs():
        cmd += ["-t", ref]
    return [*cmd, str(REPO_ROOT)]


def wheelhouse_image(row: Row) -> str:
    """The local image that carries a row's wheels (built by `envcheck image wheelhouse`)."""
    return f"envcheck-wheelhouse:{row.id}"


def wheelhouse_image_command(row: Row, dest: Path, docker: str | None = None) -> list[str]:
    """`docker build` of an image holding only the wheels in `dest` (Dockerfile read from stdin)."""
    return [docker or docker_binary(), "build", "-t", wheelhouse_image(row), "-f", "-", str(dest)]


WHEELHOUSE_DOCKERFILE = "FROM scratch\nCOPY *.whl /\n"


def run_build(req: BuildRequest, timeout_s: float = BUILD_TIMEOUT_S) -> str:
    """Build the image (output streams through); returns its first ref. One-line error on failure."""
    env = {**os.environ, "DOCKER_BUILDKIT": "1"}
    try:
        done = subprocess.run(build_command(req), env=env, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise FatalError(
            f"docker build of {req.refs()[0]} took over {timeout_s:g}s and was stopped", ExitCode.FAILED
        ) from None
    if done.returncode != 0:
        raise FatalError(
            f"docker build of {req.refs()[0]} failed (exit {done.returncode}); see the output above",
            ExitCode.FAILED,
        )
    return req.refs()[0]


def vcs_ref() -> str:
    """The repository's short commit for the image's revision label; "unknown" outside a git checkout."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            cwd=REPO_ROOT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return out.stdout.strip() or "unknown"


# envcheck's dependencies in the images, with the `nvml` and `cluster` extras (the documented node modes write a
# --prometheus textfile): from PyPI (a torch index may not mirror them). Equal to docker/install-envcheck-deps.sh.
ENVCHECK_DEPS = ["rich>=13", "packaging>=22", "nvidia-ml-py>=12", "prometheus_client>=0.20"]


def deps_download_command(row: Row, dest: Path) -> list[str]:
    """`pip download` of envcheck's own dependencies, from PyPI, for the image's Python, into `dest`."""
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--only-binary=:all:",
        "--python-version",
        row.python,
        "--implementation",
        "cp",
        "--index-url",
        "https://pypi.org/simple",
        "-d",
        str(dest),
    ]
    return [*cmd, *ENVCHECK_DEPS]


def wheelhouse_command(row: Row, dest: Path, extra: list[str]) -> list[str]:
    """`pip download` of the row's wheels (and `extra` requirements) for the image's Python and x86_64 glibc
    into `dest`."""
    platforms = [f"manylinux_2_{n}_x86_64" for n in range(39, 4, -1)]
    platforms += ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"]
    pins = [f"torch=={row.torch}", f"torchvision=={row.torchvision}"]
    if row.torchaudio:
        pins.append(f"torchaudio=={row.torchaudio}")
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--only-binary=:all:",
        "--python-version",
        row.python,
        "--implementation",
        "cp",
        "--index-url",
        row.index_url,
        "-d",
        str(dest),
    ]
    for platform in platforms:
        cmd += ["--platform", platform]
    return [*cmd, *pins, *extra, "setuptools>=68", "wheel", f"uv=={UV_VERSION}", "ninja"]
