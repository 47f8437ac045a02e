"""A row's wheelhouse on the host: `pip download` its wheels, pack them into an image, find that image for a build.

The build path drives the docker CLI (BuildKit secrets need it, see `envcheck.images.build`), so the wheelhouse
image is built and looked up through the CLI too.
"""

from __future__ import annotations

import os
import subprocess
import zipfile
from pathlib import Path

from envcheck.core.errors import ExitCode, FatalError, UsageError
from envcheck.images import build as builder
from envcheck.images.engine import docker_binary
from envcheck.images.matrix import Row
from envcheck.images.nvcc import nvcc_requirement

DOWNLOAD_TIMEOUT_S = 3600.0


def download(row: Row, dest: Path, devel: bool = True) -> None:
    """`pip download` the row's wheels, envcheck's own dependencies and (with `devel`) its nvcc into `dest`."""
    dest.mkdir(parents=True, exist_ok=True)
    _pip(builder.wheelhouse_command(row, dest, []))
    _pip(builder.deps_download_command(row, dest))
    if devel:
        _pip(builder.wheelhouse_command(row, dest, [nvcc_requirement(torch_requires(dest, row), row.cuda)]))


def pack(row: Row, dest: Path) -> str:
    """Pack the wheels in `dest` into envcheck-wheelhouse:<row> (the build mounts it for OFFLINE builds)."""
    env = {**os.environ, "DOCKER_BUILDKIT": "1"}
    try:
        done = subprocess.run(
            builder.wheelhouse_image_command(row, dest),
            input=builder.WHEELHOUSE_DOCKERFILE,
            text=True,
            env=env,
            timeout=DOWNLOAD_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise FatalError(
            "building the wheelhouse image took over an hour and was stopped", ExitCode.FAILED
        ) from None
    if done.returncode != 0:
        raise FatalError(
            f"building {builder.wheelhouse_image(row)} failed (exit {done.returncode})", ExitCode.FAILED
        )
    return builder.wheelhouse_image(row)


def for_build(row: Row, offline: bool) -> str | None:
    """The row's wheelhouse image when it exists (always used if present; required with --offline)."""
    ref = builder.wheelhouse_image(row)
    done = subprocess.run(
        [docker_binary(), "image", "inspect", ref], capture_output=True, timeout=60, check=False
    )
    if done.returncode == 0:
        return ref
    if offline:
        raise UsageError(f"--offline needs the wheelhouse image {ref}; run `make wheelhouse ROW={row.id}`")
    return None


def _pip(cmd: list[str]) -> None:
    try:
        done = subprocess.run(cmd, timeout=DOWNLOAD_TIMEOUT_S, check=False, env=os.environ)
    except subprocess.TimeoutExpired:
        raise FatalError("pip download took over an hour and was stopped", ExitCode.FAILED) from None
    if done.returncode != 0:
        raise FatalError(
            f"pip download failed (exit {done.returncode}); see the output above", ExitCode.FAILED
        )


def torch_requires(dest: Path, row: Row) -> list[str]:
    """The Requires-Dist lines of the row's torch wheel in `dest` (which nvcc matches its CUDA)."""
    for wheel in sorted(dest.glob(f"torch-{row.torch}*.whl")):
        with zipfile.ZipFile(wheel) as zf:
            name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
            lines = zf.read(name).decode("utf-8", errors="replace").splitlines()
        return [line.split(":", 1)[1].strip() for line in lines if line.startswith("Requires-Dist:")]
    raise FatalError(f"no torch-{row.torch} wheel in {dest} after download", ExitCode.FAILED)
