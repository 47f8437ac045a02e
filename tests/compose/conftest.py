"""Session fixtures: an SSH key. The dev-container images (`dev_images`: runtime, jupyter and ssh, built once per
session FROM the shared torch layers, or named by ENVCHECK_DEV_IMAGE_REPO and ENVCHECK_DEV_IMAGE_TAG) are
tests/helpers/image_fixtures.py's, shared with tests/images."""

from __future__ import annotations

import io

import paramiko
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, PublicFormat


@pytest.fixture(scope="session")
def ssh_key() -> tuple[paramiko.PKey, str]:
    """A fresh ed25519 key pair: (private key for paramiko, public line for authorized_keys)."""
    private = Ed25519PrivateKey.generate()
    pem = private.private_bytes(Encoding.PEM, PrivateFormat.OpenSSH, NoEncryption()).decode()
    public = private.public_key().public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH).decode()
    return paramiko.Ed25519Key.from_private_key(io.StringIO(pem)), f"{public} envcheck-test"
