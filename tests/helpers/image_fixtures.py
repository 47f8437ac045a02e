"""The images the Docker tests run, built once per session and shared by every test that uses one (tests/images,
tests/compose): the CI row's runtime, devel, jupyter and ssh targets, all tagged envcheck-test:<full tag>, all built
with the CA bundle that carries the secret marker (which no layer may hold). A plugin of tests/conftest.py.

The row is ENVCHECK_TEST_ROW (default: the CI row, whose wheels are all on PyPI) on ENVCHECK_TEST_BASE (default
local/debian:bookworm, a debootstrap import: `make base-image`). With the row's wheelhouse image present
(`make wheelhouse`) builds are offline. ENVCHECK_TEST_REBUILD=0 reuses existing tags. ENVCHECK_TEST_BUILD_DATE (set by
`make test` for its two Docker sessions) is the images' build date, so that they build them once
(tests/helpers/containers.py). ENVCHECK_DEV_IMAGE_REPO and
ENVCHECK_DEV_IMAGE_TAG name dev-container images built elsewhere (`<repo>:<tag>-runtime`, `-jupyter`, `-ssh`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from envcheck.images.matrix import Row, default_matrix_path, load_matrix
from tests.compose.images import DevImages, existing_dev_images
from tests.helpers.containers import CA_BUNDLE, SECRET_MARKER, TEST_ROW, build_image


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


@pytest.fixture(scope="session")
def runtime_image(test_row: Row, ca_with_marker: Path, docker_client: Any) -> str:
    return build_image(test_row, "runtime", ca_with_marker, docker_client)


@pytest.fixture(scope="session")
def devel_image(test_row: Row, ca_with_marker: Path, docker_client: Any) -> str:
    return build_image(test_row, "devel", ca_with_marker, docker_client)


@pytest.fixture(scope="session")
def dev_images(
    test_row: Row, ca_with_marker: Path, docker_client: Any, request: pytest.FixtureRequest
) -> DevImages:
    """Images for the runtime, jupyter and ssh targets, as compose.yaml names them (the session's runtime image)."""
    repo, tag = os.environ.get("ENVCHECK_DEV_IMAGE_REPO"), os.environ.get("ENVCHECK_DEV_IMAGE_TAG")
    if repo and tag:
        return existing_dev_images(repo, tag)
    runtime: str = request.getfixturevalue("runtime_image")
    for target in ("jupyter", "ssh"):
        build_image(test_row, target, ca_with_marker, docker_client)
    name, _, full_tag = runtime.rpartition(":")
    return DevImages(name, full_tag.removesuffix("-runtime"))
