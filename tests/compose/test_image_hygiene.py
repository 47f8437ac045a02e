"""No secret in the dev images: not in `docker history`, not in the image config, not in any layer."""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.compose.images import DevImages
from tests.compose.stack import DOCKER, docker

pytestmark = [pytest.mark.docker, pytest.mark.slow]
SECRET_TEXT = re.compile(
    r"PRIVATE KEY|JUPYTER_TOKEN=\S|SSH_AUTHORIZED_KEYS=\S|token=[0-9a-f]{8}|"
    r"ssh-(ed25519|rsa) AAAA|PASSWORD=\S|hashed_password\s*=\s*['\"]\S",
    re.IGNORECASE,
)
SECRET_FILES = re.compile(
    r"(^|/)(ssh_host_[a-z0-9]+_key|authorized_keys|jupyter_cookie_secret|"
    r"jupyter_server_config\.json|\.jupyter/.*token.*)$"
)


@pytest.mark.parametrize("target", ["jupyter", "ssh"])
def test_history_and_config_hold_no_secret(dev_images: DevImages, target: str) -> None:
    ref = dev_images.ref(target)
    history = docker("history", "--no-trunc", "--format", "{{.CreatedBy}}", ref).stdout
    config = json.loads(docker("image", "inspect", ref).stdout)[0]
    text = history + json.dumps(config["Config"]) + json.dumps(config.get("ContainerConfig") or {})
    assert SECRET_TEXT.search(text) is None, SECRET_TEXT.search(text)
    names = {entry.split("=", 1)[0] for entry in config["Config"]["Env"]}
    assert not names & {"JUPYTER_TOKEN", "JUPYTER_TOKEN_FILE", "SSH_AUTHORIZED_KEYS"}
    assert config["Config"]["Healthcheck"]["Test"][0] == "CMD"


def test_the_secret_patterns_catch_a_baked_token() -> None:
    assert SECRET_TEXT.search("ENV JUPYTER_TOKEN=abc123") and SECRET_TEXT.search(
        "-----BEGIN OPENSSH PRIVATE KEY"
    )
    assert SECRET_FILES.search("etc/ssh/ssh_host_ed25519_key") and not SECRET_FILES.search(
        "ssh_host_rsa_key.pub"
    )


@pytest.mark.parametrize("target", ["jupyter", "ssh"])
def test_no_layer_ever_held_a_host_key_or_token_file(dev_images: DevImages, target: str) -> None:
    found = [name for name in layer_file_names(dev_images.ref(target)) if SECRET_FILES.search(name)]
    assert found == []


def layer_file_names(ref: str) -> Iterator[str]:
    """Every path in every layer of the image (files deleted by a later layer included)."""
    driver = json.loads(docker("image", "inspect", "-f", "{{json .GraphDriver}}", ref).stdout)
    if driver.get("Name") == "overlay2":
        data = driver["Data"]
        dirs = [data["UpperDir"], *data.get("LowerDir", "").split(":")]
        if all(Path(d).is_dir() for d in dirs if d):
            for layer in filter(None, dirs):
                yield from _names_in(layer)
            return
    with subprocess.Popen([DOCKER, "save", ref], stdout=subprocess.PIPE) as save:
        assert save.stdout is not None
        with tarfile.open(fileobj=save.stdout, mode="r|") as outer:
            for member in outer:
                if member.name.endswith("layer.tar"):
                    inner_file = outer.extractfile(member)
                    assert inner_file is not None
                    with tarfile.open(fileobj=inner_file, mode="r|") as inner:
                        yield from (m.name for m in inner)


@functools.cache
def _names_in(layer: str) -> tuple[str, ...]:
    """The paths in one overlay2 layer folder, walked once per session: the dev images share the torch layers."""
    return tuple(str(path.relative_to(layer)) for path in Path(layer).rglob("*"))


def test_layer_scan_finds_a_key_that_a_later_layer_deleted(dev_images: DevImages, tmp_path: Path) -> None:
    dockerfile = (
        f"FROM {dev_images.ref('runtime')}\nUSER root\n"
        "RUN mkdir -p /etc/ssh && echo fake > /etc/ssh/ssh_host_ed25519_key\n"
        "RUN rm /etc/ssh/ssh_host_ed25519_key\n"
    )
    ref = "envcheck-test:leaky-host-key"
    done = subprocess.run(
        [DOCKER, "build", "-q", "-t", ref, "-f", "-", str(tmp_path)],
        input=dockerfile,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "DOCKER_BUILDKIT": "1"},
    )
    assert done.returncode == 0, done.stderr
    try:
        assert "etc/ssh/ssh_host_ed25519_key" in set(layer_file_names(ref))
    finally:
        docker("image", "rm", "-f", ref)
