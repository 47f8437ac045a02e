"""The image tests' container helper and settings: the row and base image they build, the one container helper
(run detached, wait with a timeout, always removed), and the image build they share."""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from envcheck.images import build as builder
from envcheck.images.engine import find_docker
from envcheck.images.matrix import Row

TEST_ROW = os.environ.get("ENVCHECK_TEST_ROW", "2.11-cu130")


TEST_BASE = os.environ.get("ENVCHECK_TEST_BASE", "local/debian:bookworm")


# tests/images and tests/compose share the images (tests/helpers/image_fixtures.py)
TEST_REPO = "envcheck-test"


CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")


SECRET_MARKER = "envcheck-ca-secret-marker-7f3a"


def build_image(row: Row, target: str, ca: Path, docker_client: Any) -> str:
    """Build (or reuse) envcheck-test:<full tag> (once per session: tests/helpers/image_fixtures.py); a build failure
    fails the test with its output above.

    `make test` runs two sessions that use the images side by side (its `docker` and `bulk` streams) and gives them
    one build date (ENVCHECK_TEST_BUILD_DATE): one session's build waits for the other's (an exclusive lock on the
    checkout's Dockerfile, held while building) and is then a cache hit, the very same image (tests/images/
    test_build_paths.py), so within one `make test` a tag never moves under a test of the other session. Without the
    variable, the build's own time."""
    ref = builder.BuildRequest(row=row, target=target, repo=TEST_REPO).refs()[0]
    if os.environ.get("ENVCHECK_TEST_REBUILD") == "0" and existing_image(docker_client, ref):
        return ref
    if existing_image(docker_client, TEST_BASE) is None:
        pytest.fail(f"base image {TEST_BASE} is missing; run `make base-image`")
    if shutil.which(find_docker() or "docker") is None:
        pytest.fail("no docker CLI for BuildKit builds; set ENVCHECK_DOCKER")
    with builder.DOCKERFILE.open("rb") as dockerfile:  # a lock that leaves no file behind
        fcntl.flock(dockerfile, fcntl.LOCK_EX)
        # the request is made under the lock, from what the engine holds when this build starts
        req = builder.BuildRequest(
            row=row,
            target=target,
            repo=TEST_REPO,
            base_image=TEST_BASE,
            ca_bundle=ca,
            wheelhouse_image=existing_image(docker_client, builder.wheelhouse_image(row)),
            build_date=os.environ.get("ENVCHECK_TEST_BUILD_DATE") or None,
        )
        return builder.run_build(req, timeout_s=3000)


def existing_image(client: Any, ref: str) -> str | None:
    try:
        client.images.get(ref)
    except Exception:
        return None
    return ref


def run_in(
    client: Any, image: str, command: list[str], timeout_s: float = 300, **kwargs: Any
) -> tuple[int, str]:
    """One container helper: run detached, wait with a timeout, return (exit code, output); always removed."""
    code, logs = contained(client, image, command, timeout_s, kwargs, {"both": {}})
    return code, logs["both"]


def run_streams(
    client: Any, image: str, command: list[str], timeout_s: float = 300, **kwargs: Any
) -> tuple[int, str, str]:
    """The same helper with the streams apart: (exit code, stdout, stderr)."""
    code, logs = contained(
        client, image, command, timeout_s, kwargs, {"stdout": {"stderr": False}, "stderr": {"stdout": False}}
    )
    return code, logs["stdout"], logs["stderr"]


def contained(
    client: Any,
    image: str,
    command: list[str],
    timeout_s: float,
    kwargs: dict[str, Any],
    reads: dict[str, dict[str, bool]],
) -> tuple[int, dict[str, str]]:
    container = client.containers.run(image, command, detach=True, **kwargs)
    try:
        try:
            status = container.wait(timeout=timeout_s)
        except Exception:
            container.kill()
            output = container.logs().decode(errors="replace")
            pytest.fail(f"{command} in {image} exceeded {timeout_s}s; output:\n{output}")
        return int(status["StatusCode"]), {
            k: container.logs(**v).decode(errors="replace") for k, v in reads.items()
        }
    finally:
        container.remove(force=True)
