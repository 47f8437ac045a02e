"""The real runtime image of the CI row through the publish path once: staged to a local docker-registry, pulled
back by digest, envcheck (the image's own) run inside it on the CPU, every public tag promoted to that digest.
Slow: the image is several GB (built once per session by conftest's runtime_image)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.images.registry_helpers import running_registry, tag_digest
from tests.images.test_publish_registry import full_publish, public_tags

pytestmark = [pytest.mark.docker, pytest.mark.bulk, pytest.mark.slow]


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[str]:
    with running_registry(tmp_path / "registry") as address:
        yield address


def test_the_runtime_image_is_verified_by_digest_and_promoted(
    registry: str, runtime_image: str, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    digest = full_publish(state, f"{registry}/envcheck", runtime_image)
    report = json.loads((state / "report.json").read_text())
    assert report["images"][0]["image"] == f"{registry}/envcheck@{digest}"
    names = {r["name"] for r in report["images"][0]["report"]["results"]}
    assert "cuda.available" in names, "the image's own envcheck ran, not a stand-in"
    assert {tag_digest(registry, "envcheck", tag) for tag in public_tags()} == {digest}
