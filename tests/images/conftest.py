"""Session fixtures: images built once per session (docker build cache makes a rebuild cheap).

The row is ENVCHECK_TEST_ROW (default: the CI row, whose wheels are all on PyPI) on ENVCHECK_TEST_BASE
(default local/debian:bookworm, a debootstrap import: `make base-image`). With the row's wheelhouse
image present (`make wheelhouse`) builds are offline. ENVCHECK_TEST_REBUILD=0 reuses existing tags.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from envcheck.images.matrix import Row, default_matrix_path, load_matrix
from tests.helpers.containers import (
    CA_BUNDLE,
    SECRET_MARKER,
    TEST_ROW,
    build_image,
)


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
