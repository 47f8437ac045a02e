"""Build (or find) the images compose.yaml runs: `<repo>:<tag>-runtime`, `-jupyter`, `-ssh`.

The build uses docker/Dockerfile with the build args of one matrix row (ENVCHECK_TEST_ROW, default: the
Makefile's ROW) exactly as `make image` does (envcheck.images.build.build_command), so the torch layers are shared with the runtime image
through the BuildKit cache and the dev targets add only their own layers.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from envcheck.images.build import WHEELHOUSE, BuildRequest, build_command
from envcheck.images.matrix import default_matrix_path, load_matrix
from tests.compose.stack import DOCKER, ROOT, docker

TARGETS = ("runtime", "jupyter", "ssh")
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
DEFAULT_ROW = "2.11-cu130"  # the Makefile's default ROW


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


def existing_dev_images(repo: str, tag: str) -> DevImages:
    """Use images built elsewhere (CI script); fail with the missing reference otherwise."""
    images = DevImages(repo, tag)
    for target in TARGETS:
        if docker("image", "inspect", images.ref(target), timeout=30).returncode != 0:
            raise RuntimeError(f"image {images.ref(target)} not found; unset ENVCHECK_DEV_IMAGE_REPO to build it")
    return images


def build_request(target: str) -> BuildRequest:
    """What `make image ROW=<row> TARGET=<target>` builds, with this machine's base image and wheelhouse."""
    matrix = load_matrix(default_matrix_path())
    row_id = os.environ.get("ENVCHECK_TEST_ROW", DEFAULT_ROW)
    base = os.environ.get("ENVCHECK_BASE_IMAGE")
    if base is None and docker("image", "inspect", "local/debian:bookworm", timeout=30).returncode == 0:
        base = "local/debian:bookworm"  # no registry is reachable on the build machine
    row = matrix.row(row_id)
    offline = any(WHEELHOUSE.glob(f"torch-{row.torch}-*.whl"))  # as CI does after `make wheelhouse`
    return BuildRequest(row=row, target=target, base_image=base, offline=offline,
                        ca_bundle=CA_BUNDLE if CA_BUNDLE.is_file() else None)


def build_dev_images(timeout_s: float = 3000) -> DevImages:
    """Build the three targets (the first build of the torch layers takes minutes; later ones are cached)."""
    refs = {}
    for target in TARGETS:
        req = build_request(target)
        started = time.monotonic()
        WHEELHOUSE.mkdir(exist_ok=True)
        done = subprocess.run(build_command(req, docker=DOCKER), cwd=ROOT, capture_output=True, text=True,  # noqa: S603
                              timeout=timeout_s, env={**os.environ, "DOCKER_BUILDKIT": "1"})
        if done.returncode != 0:
            raise RuntimeError(f"docker build --target {target} failed:\n{done.stderr[-6000:]}")
        refs[target] = req.refs()[0]
        print(f"built {refs[target]} in {time.monotonic() - started:.0f}s")
    repo, _, tag = refs["runtime"].rpartition(":")
    return DevImages(repo, tag.removesuffix("-runtime"))
