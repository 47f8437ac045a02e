"""Session fixtures: images built once per session (docker build cache makes a rebuild cheap).

The row is ENVCHECK_TEST_ROW (default: the CI row, whose wheels are all on PyPI) on ENVCHECK_TEST_BASE
(default local/debian:bookworm, a debootstrap import: `make base-image`). With the row's wheelhouse
image present (`make wheelhouse`) builds are offline. ENVCHECK_TEST_REBUILD=0 reuses existing tags.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from envcheck.images import build as builder
from envcheck.images.engine import find_docker
from envcheck.images.matrix import Row, default_matrix_path, load_matrix

TEST_ROW = os.environ.get("ENVCHECK_TEST_ROW", "2.11-cu130")
TEST_BASE = os.environ.get("ENVCHECK_TEST_BASE", "local/debian:bookworm")
TEST_REPO = "envcheck-images-test"  # not shared with other helpers on this engine
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
SECRET_MARKER = "envcheck-ca-secret-marker-7f3a"


@pytest.fixture(scope="session")
def docker_client() -> Iterator[Any]:
    import docker

    client = docker.from_env(timeout=120)
    yield client
    client.close()


@pytest.fixture(scope="session")
def test_row() -> Row:
    return load_matrix(default_matrix_path()).row(TEST_ROW)


@pytest.fixture(scope="session")
def ca_with_marker(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The machine's CA bundle plus a marker line, passed as the secret; the marker must never leak."""
    path = tmp_path_factory.mktemp("secret") / "ca.pem"
    text = CA_BUNDLE.read_text() if CA_BUNDLE.is_file() else ""
    path.write_text(f"# {SECRET_MARKER}\n{text}")
    return path


def build_image(row: Row, target: str, ca: Path, docker_client: Any) -> str:
    """Build (or reuse) envcheck-test:<full tag>; a build failure fails the test with its output above."""
    req = builder.BuildRequest(row=row, target=target, repo=TEST_REPO, base_image=TEST_BASE, ca_bundle=ca,
                               wheelhouse_image=_existing(docker_client, builder.wheelhouse_image(row)))
    ref = req.refs()[0]
    if os.environ.get("ENVCHECK_TEST_REBUILD") == "0" and _existing(docker_client, ref):
        return ref
    if _existing(docker_client, TEST_BASE) is None:
        pytest.fail(f"base image {TEST_BASE} is missing; run `make base-image`")
    if shutil.which(find_docker() or "docker") is None:
        pytest.fail("no docker CLI for BuildKit builds; set ENVCHECK_DOCKER")
    return builder.run_build(req, timeout_s=3000)


def _existing(client: Any, ref: str) -> str | None:
    try:
        client.images.get(ref)
    except Exception:
        return None
    return ref


@pytest.fixture(scope="session")
def runtime_image(test_row: Row, ca_with_marker: Path, docker_client: Any) -> str:
    return build_image(test_row, "runtime", ca_with_marker, docker_client)


@pytest.fixture(scope="session")
def devel_image(test_row: Row, ca_with_marker: Path, docker_client: Any) -> str:
    return build_image(test_row, "devel", ca_with_marker, docker_client)


def run_in(client: Any, image: str, command: list[str], timeout_s: float = 300, **kwargs: Any) -> tuple[int, str]:
    """One container helper: run detached, wait with a timeout, return (exit code, output); always removed."""
    code, logs = _contained(client, image, command, timeout_s, kwargs, {"both": {}})
    return code, logs["both"]


def run_streams(client: Any, image: str, command: list[str], timeout_s: float = 300,
                **kwargs: Any) -> tuple[int, str, str]:
    """The same helper with the streams apart: (exit code, stdout, stderr)."""
    code, logs = _contained(client, image, command, timeout_s, kwargs,
                            {"stdout": {"stderr": False}, "stderr": {"stdout": False}})
    return code, logs["stdout"], logs["stderr"]


def _contained(client: Any, image: str, command: list[str], timeout_s: float, kwargs: dict[str, Any],
               reads: dict[str, dict[str, bool]]) -> tuple[int, dict[str, str]]:
    container = client.containers.run(image, command, detach=True, **kwargs)
    try:
        try:
            status = container.wait(timeout=timeout_s)
        except Exception:
            container.kill()
            output = container.logs().decode(errors="replace")
            pytest.fail(f"{command} in {image} exceeded {timeout_s}s; output:\n{output}")
        return int(status["StatusCode"]), {k: container.logs(**v).decode(errors="replace") for k, v in reads.items()}
    finally:
        container.remove(force=True)
