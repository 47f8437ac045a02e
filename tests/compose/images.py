"""Build (or find) the images compose.yaml runs: `<repo>:<tag>-runtime`, `-jupyter`, `-ssh`.

The build uses docker/Dockerfile with the build args of one matrix row (ENVCHECK_TEST_ROW, default: the
row marked latest) exactly as `make image` does, so the torch layers are shared with the runtime image
through the BuildKit cache and the dev targets add only their own layers.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from envcheck.images.matrix import default_matrix_path, load_matrix
from tests.compose.stack import DOCKER, ROOT, docker

TARGETS = ("runtime", "jupyter", "ssh")
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")


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


def build_args(target: str) -> dict[str, str]:
    """Build args of the test row; BASE_IMAGE may be overridden (ENVCHECK_BASE_IMAGE, local base here)."""
    matrix = load_matrix(default_matrix_path())
    row_id = os.environ.get("ENVCHECK_TEST_ROW")
    row = matrix.row(row_id) if row_id else next(r for r in matrix.rows if r.latest)
    args = row.build_args(target)
    base = os.environ.get("ENVCHECK_BASE_IMAGE")
    if base is None and docker("image", "inspect", "local/debian:bookworm", timeout=30).returncode == 0:
        base = "local/debian:bookworm"  # no registry is reachable on the build machine
    if base:
        args["BASE_IMAGE"] = base
    return args


def build_dev_images(repo: str = "envcheck-test", timeout_s: float = 3000) -> DevImages:
    """Build the three targets (the first build of the torch layers takes minutes; later ones are cached)."""
    row_tag = build_args("runtime")["TORCH_VERSION"]
    images = DevImages(repo, f"{row_tag}-test")
    (ROOT / ".wheelhouse").mkdir(exist_ok=True)  # the Dockerfile bind-mounts it as a find-links dir
    for target in TARGETS:
        cmd = [DOCKER, "build", "-f", "docker/Dockerfile", "--target", target, "-t", images.ref(target)]
        for key, value in build_args(target).items():
            cmd += ["--build-arg", f"{key}={value}"]
        if CA_BUNDLE.exists():
            cmd += ["--secret", f"id=ca,src={CA_BUNDLE}"]
        started = time.monotonic()
        done = subprocess.run([*cmd, "."], cwd=ROOT, capture_output=True, text=True,  # noqa: S603
                              timeout=timeout_s, env={**os.environ, "DOCKER_BUILDKIT": "1"})
        if done.returncode != 0:
            raise RuntimeError(f"docker build --target {target} failed:\n{done.stderr[-6000:]}")
        print(f"built {images.ref(target)} in {time.monotonic() - started:.0f}s")
    return images
