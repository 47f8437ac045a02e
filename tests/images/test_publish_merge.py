"""The multi-platform join of the publish path (envcheck.images.publish_merge): each platform's leg stages under its
own staging tag, and the index made of them must hold every platform of the row with the digest that leg staged and
verified. Staged: the index documents (shaped as `docker buildx imagetools create` writes an OCI index, with
BuildKit's attestation manifest); creating one needs buildx and a registry, which CI's merge job has."""

from __future__ import annotations

from pathlib import Path

import pytest

from envcheck.core.errors import UsageError
from envcheck.images.matrix import default_matrix_path, load_matrix
from envcheck.images.publish_merge import index_platforms, index_problems, parts_of
from envcheck.images.publish_plan import make_plan
from envcheck.images.publish_state import Staged, save_staged

AMD = "sha256:" + "a" * 64
ARM = "sha256:" + "b" * 64


def index(*entries: tuple[str, str]) -> dict:
    manifests = [
        {
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": d,
            "platform": {"os": p.split("/")[0], "architecture": p.split("/")[1]},
        }
        for p, d in entries
    ]
    manifests.append(
        {"digest": "sha256:" + "c" * 64, "platform": {"os": "unknown", "architecture": "unknown"}}
    )
    return {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": manifests,
    }


def test_a_join_of_the_verified_digests_passes() -> None:
    good = index(("linux/amd64", AMD), ("linux/arm64", ARM))
    assert index_platforms(good) == {
        "linux/amd64": AMD,
        "linux/arm64": ARM,
    }  # the attestation entry is not one
    assert index_problems(good, {"linux/amd64": AMD, "linux/arm64": ARM}) == []


def test_a_missing_platform_or_another_digest_is_named() -> None:
    expected = {"linux/amd64": AMD, "linux/arm64": ARM}
    assert index_problems(index(("linux/amd64", AMD)), expected) == ["linux/arm64: missing from the index"]
    swapped = index_problems(index(("linux/amd64", AMD), ("linux/arm64", "sha256:" + "d" * 64)), expected)
    assert swapped == [f"linux/arm64: the index names sha256:{'d' * 64}, but {ARM} was staged and verified"]
    single = {"schemaVersion": 2, "config": {}, "layers": []}
    assert index_problems(single, expected) == [
        "the staging tag is a single image, not a multi-platform index"
    ]


def test_each_leg_stages_under_its_own_tag_and_the_merge_needs_every_platform(tmp_path: Path) -> None:
    matrix = load_matrix(default_matrix_path())
    arm = make_plan(matrix, "2.14-cu130", "runtime", "ghcr.io/org/envcheck", platform="linux/arm64")
    whole = make_plan(matrix, "2.14-cu130", "runtime", "ghcr.io/org/envcheck")
    assert (
        arm.staging_tag == "staging-2.14-cu130-runtime-arm64"
        and whole.staging_tag == "staging-2.14-cu130-runtime"
    )
    assert arm.public_tags == whole.public_tags
    with pytest.raises(UsageError, match="not built for linux/arm64"):
        make_plan(matrix, "2.10-cu130", "runtime", "ghcr.io/org/envcheck", platform="linux/arm64")
    save_staged(tmp_path / "amd64", Staged.from_plan(whole, AMD))
    save_staged(tmp_path / "arm64", Staged.from_plan(arm, ARM))
    row = matrix.row("2.14-cu130")
    parts = parts_of(row, {"linux/amd64": tmp_path / "amd64", "linux/arm64": tmp_path / "arm64"})
    assert {p: s.digest for p, s in parts.items()} == {"linux/amd64": AMD, "linux/arm64": ARM}
    with pytest.raises(UsageError, match="built for linux/amd64, linux/arm64"):
        parts_of(row, {"linux/amd64": tmp_path / "amd64"})
