"""Session fixtures: the dev-container images (built once, FROM the shared torch layers) and an SSH key.

Images: when ENVCHECK_DEV_IMAGE_REPO and ENVCHECK_DEV_IMAGE_TAG name images that already exist
(`<repo>:<tag>-runtime`, `-jupyter`, `-ssh`; e.g. built by the CI script), they are used as they are.
Otherwise the targets are built here with docker/Dockerfile and the build args of the images helper
(tests/compose/images.py), so the torch layers come from the build cache.
"""

from __future__ import annotations

import io
import os

import paramiko
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, PublicFormat

from tests.compose.images import DevImages, build_dev_images, existing_dev_images


@pytest.fixture(scope="session")
def dev_images() -> DevImages:
    """Images for the runtime, jupyter and ssh targets, as compose.yaml names them."""
    repo, tag = os.environ.get("ENVCHECK_DEV_IMAGE_REPO"), os.environ.get("ENVCHECK_DEV_IMAGE_TAG")
    if repo and tag:
        return existing_dev_images(repo, tag)
    return build_dev_images()


@pytest.fixture(scope="session")
def ssh_key() -> tuple[paramiko.PKey, str]:
    """A fresh ed25519 key pair: (private key for paramiko, public line for authorized_keys)."""
    private = Ed25519PrivateKey.generate()
    pem = private.private_bytes(Encoding.PEM, PrivateFormat.OpenSSH, NoEncryption()).decode()
    public = private.public_key().public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH).decode()
    return paramiko.Ed25519Key.from_private_key(io.StringIO(pem)), f"{public} envcheck-test"
