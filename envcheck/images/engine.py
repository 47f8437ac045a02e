"""The Docker SDK, imported lazily, and the engine errors translated into one-line fixes."""

from __future__ import annotations

import importlib
import os
import shutil
from typing import Any

from envcheck.core.errors import ExitCode, FatalError

DEBIAN_DOCKER = "/usr/bin/docker"  # Debian's docker.io client: BuildKit (`build --secret`) built in


def find_docker() -> str | None:
    """The docker CLI envcheck runs: $ENVCHECK_DOCKER, else Debian's /usr/bin/docker, else `docker` on PATH;
    None when there is none."""
    chosen = os.environ.get("ENVCHECK_DOCKER")
    if chosen:
        return chosen
    if os.access(DEBIAN_DOCKER, os.X_OK):
        return DEBIAN_DOCKER
    return shutil.which("docker")


def docker_binary() -> str:
    """`find_docker()`, or a one-line error (it must support `--secret` with DOCKER_BUILDKIT=1)."""
    found = find_docker()
    if not found:
        raise FatalError(
            "no docker CLI found; install docker.io or set ENVCHECK_DOCKER=/path/to/docker", ExitCode.USAGE
        )
    return found


def docker_sdk() -> Any:
    """The `docker` package; a one-line error when it is not installed."""
    try:
        return importlib.import_module("docker")
    except ImportError:
        raise FatalError(
            "the Docker SDK is not installed; run `pip install 'envcheck[docker]'`", ExitCode.USAGE
        ) from None


def connect(timeout_s: float = 30.0) -> Any:
    """A client for the local engine (DOCKER_HOST honoured); one-line error when none answers."""
    docker = docker_sdk()
    try:
        client = docker.from_env(timeout=int(timeout_s))
        client.ping()
    except Exception as exc:
        why = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise FatalError(
            f"no Docker daemon answers ({why}); start it (`sudo systemctl start docker` or "
            "`dockerd &`) or set DOCKER_HOST",
            ExitCode.USAGE,
        ) from None
    return client


def require_image(client: Any, image: str) -> Any:
    """The local image object; one-line error (never a pull attempt) when it is absent."""
    docker = docker_sdk()
    try:
        return client.images.get(image)
    except docker.errors.ImageNotFound:
        raise FatalError(
            f"image {image} not found locally; build it (`make image ROW=<row> TARGET=<target>`, "
            f"see `envcheck matrix list`) or `docker pull {image}`",
            ExitCode.USAGE,
        ) from None


def has_image(client: Any, ref: str) -> bool:
    """Whether the engine holds the image `ref` locally (never pulls)."""
    try:
        client.images.get(ref)
    except Exception:
        return False
    return True


def explain_start_error(image: str, exc: Exception) -> FatalError:
    """Turn a container start failure into the fix a user needs (GPU refusals: envcheck.images.gpu_errors)."""
    from envcheck.images.gpu_errors import default_row_of, explain_gpu_refusal

    text = str(getattr(exc, "explanation", None) or exc)
    refusal = explain_gpu_refusal(text, default_row_of(image))
    if refusal is not None:
        return FatalError(
            f"{image}: cannot give the container a GPU: {refusal.cause} (the daemon said: "
            f"{refusal.matched}); fix: {refusal.fix} [fault: {refusal.fault_class}]",
            ExitCode.USAGE,
        )
    first = (text.strip().splitlines() or [type(exc).__name__])[0]
    return FatalError(f"{image}: the container did not start: {first}", ExitCode.USAGE)
