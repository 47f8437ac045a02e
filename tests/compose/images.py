"""Where the images compose.yaml runs are: `<repo>:<tag>-runtime`, `-jupyter`, `-ssh`.

The session builds them once for tests/images and tests/compose alike (tests/helpers/image_fixtures.py), so the
jupyter and ssh targets add only their own layers to the runtime image's.
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.compose.stack import docker

TARGETS = ("runtime", "jupyter", "ssh")


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
