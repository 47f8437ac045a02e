"""Build (or find) the images compose.yaml runs: `<repo>:<tag>-runtime`, `-jupyter`, `-ssh`.

Built exactly like tests/images does (envcheck.images.build with the CI row ENVCHECK_TEST_ROW, the base
ENVCHECK_TEST_BASE and the row's wheelhouse image when present), so the torch layers come from the
BuildKit cache that the runtime image filled, and jupyter/ssh add only their own layers.
ENVCHECK_TEST_REBUILD=0 reuses existing tags.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from envcheck.images import build as builder
from envcheck.images.matrix import default_matrix_path, load_matrix
from tests.compose.stack import docker

TARGETS = ("runtime", "jupyter", "ssh")
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
TEST_ROW = os.environ.get("ENVCHECK_TEST_ROW", "2.11-cu130")
TEST_BASE = os.environ.get("ENVCHECK_TEST_BASE", "local/debian:bookworm")
TEST_REPO = "envcheck-test"


@dataclass(frozen=True)
class DevImages:
    """Where the test images are: compose.yaml reads ENVCHECK_IMAGE_REPO and ENVCHECK_TAG."""

    repo: str
    tag: str

    def ref(self, target: str) -> str:
        """Full image reference of one target."""
        return f"{self.repo}:{self.tag}-{target}"

    def env(self) -> dict[str, str]:
        """Variables that point compose.yaml at these images."""
        return {"ENVCHECK_IMAGE_REPO": self.repo, "ENVCHECK_TAG": self.tag}


def _exists(ref: str) -> bool:
    return docker("image", "inspect", ref, timeout=60).returncode == 0


def existing_dev_images(repo: str, tag: str) -> DevImages:
    """Use images built elsewhere; fail with the missing reference otherwise."""
    images = DevImages(repo, tag)
    for target in TARGETS:
        if not _exists(images.ref(target)):
            raise RuntimeError(
                f"image {images.ref(target)} not found; unset ENVCHECK_DEV_IMAGE_REPO to build it"
            )
    return images


def build_request(target: str) -> builder.BuildRequest:
    """What tests/images (and `make image ROW=<row> TARGET=<target>`) build on this machine."""
    row = load_matrix(default_matrix_path()).row(TEST_ROW)
    wheelhouse = builder.wheelhouse_image(row)
    return builder.BuildRequest(
        row=row,
        target=target,
        repo=TEST_REPO,
        base_image=TEST_BASE,
        ca_bundle=CA_BUNDLE if CA_BUNDLE.is_file() else None,
        wheelhouse_image=wheelhouse if _exists(wheelhouse) else None,
    )


def build_dev_images() -> DevImages:
    """Build the three targets (minutes for the first torch layer; seconds once cached)."""
    if not _exists(TEST_BASE):
        raise RuntimeError(f"base image {TEST_BASE} is missing; run `make base-image`")
    refs = {}
    for target in TARGETS:
        req = build_request(target)
        refs[target] = req.refs()[0]
        if os.environ.get("ENVCHECK_TEST_REBUILD") == "0" and _exists(refs[target]):
            continue
        started = time.monotonic()
        builder.run_build(req, timeout_s=3000)
        print(f"built {refs[target]} in {time.monotonic() - started:.0f}s")
    repo, _, tag = refs["runtime"].rpartition(":")
    return DevImages(repo, tag.removesuffix("-runtime"))
