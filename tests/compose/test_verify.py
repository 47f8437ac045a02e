"""The `verify` service: `make verify` inside the runtime image, run once, exit code passed through.

Not verifiable here (no GPU, no nvidia-container-toolkit): the GPU reservation itself. On this host it
fails with the message users see without the toolkit, which the last test pins down.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.compose.images import DevImages
from tests.compose.stack import docker, project

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_verify_passes_on_cpu_with_the_cpu_override(dev_images: DevImages) -> None:
    with project("compose.yaml", "compose.cpu.yaml", **dev_images.env()) as proj:
        done = proj.compose("run", "--rm", "verify", timeout=900, check=False)
        print(done.stdout[-3000:], done.stderr[-2000:])
        assert done.returncode == 0
        assert "--allow-cpu" in done.stdout + done.stderr  # make echoes the envcheck command it ran


def test_verify_exit_code_is_makes(dev_images: DevImages) -> None:
    # Without ALLOW_CPU=1, no GPU is an error: the failure must come back as compose's exit code.
    with project("compose.yaml", "compose.cpu.yaml", **dev_images.env()) as proj:
        done = proj.compose("run", "--rm", "verify", "make", "verify", timeout=900, check=False)
        assert done.returncode != 0, done.stdout[-3000:]


def test_gpu_reservation_without_nvidia_toolkit_fails_with_the_known_message(dev_images: DevImages) -> None:
    if "nvidia" in docker("info", "-f", "{{json .Runtimes}}").stdout:
        pytest.skip("this engine has the NVIDIA runtime: the GPU reservation would succeed")
    with project("compose.yaml", **dev_images.env()) as proj:
        done = proj.compose("run", "--rm", "verify", timeout=300, check=False)
        assert done.returncode != 0
        assert 'could not select device driver "nvidia" with capabilities: [[gpu]]' in done.stderr


def test_repository_is_mounted_read_only_for_verify(dev_images: DevImages, tmp_path: Path) -> None:
    tmp_path.chmod(0o777)  # so that only the read-only mount can stop the write
    with project(
        "compose.yaml", "compose.cpu.yaml", **dev_images.env(), ENVCHECK_WORKSPACE=str(tmp_path)
    ) as proj:
        done = proj.compose("run", "--rm", "verify", "touch", "/workspace/x", timeout=300, check=False)
        assert done.returncode != 0 and "Read-only file system" in done.stderr
