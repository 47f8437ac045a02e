"""The SDK runner turns engine problems into one-line errors with the fix, and never leaves a container."""

from __future__ import annotations

import io
from typing import Any

import pytest

from envcheck.core.errors import FatalError
from envcheck.images.docker_run import RUNNER_LABEL, RunOptions, run_in_image
from envcheck.images.engine import connect
from tests.helpers import run_cli

pytestmark = pytest.mark.docker
BASE = "local/debian:bookworm"


def leftover_containers(client: Any) -> list[Any]:
    """The runner's containers of the very image these tests run (another stream's `envcheck image verify` may be
    running its own image's; the engine's `ancestor` filter would count images built on this one's layers too)."""
    base = client.images.get(BASE).id
    found = client.containers.list(all=True, filters={"label": RUNNER_LABEL})
    return [c for c in found if c.attrs.get("Image") == base]


def test_missing_image_is_one_line_with_the_fix() -> None:
    done = run_cli("image", "verify", "envcheck-test:does-not-exist", "--allow-cpu")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "image envcheck-test:does-not-exist not found locally" in lines[0]
    assert "make image ROW=" in lines[0]
    assert "Traceback" not in done.stderr


def test_missing_gpu_runtime_is_explained_from_the_real_engine_error(docker_client: Any) -> None:
    """This engine has no NVIDIA runtime, so a GPU request fails exactly as on a host without the toolkit."""
    if "nvidia" in str(docker_client.info().get("Runtimes", {})):
        pytest.skip("this engine has the NVIDIA runtime; the error cannot be provoked")
    client = connect()
    with pytest.raises(FatalError) as info:
        run_in_image(client, BASE, RunOptions(allow_cpu=False, command=["true"], timeout_s=60))
    message = info.value.message
    assert 'could not select device driver "" with capabilities: [[gpu]]' in message
    assert "install nvidia-container-toolkit" in message and "--allow-cpu" in message
    assert leftover_containers(docker_client) == []


def test_missing_gpu_runtime_via_cli_is_one_line() -> None:
    done = run_cli("image", "verify", BASE, timeout=120)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "nvidia-container-toolkit" in done.stderr


def test_container_over_its_timeout_is_killed_removed_and_reported(docker_client: Any) -> None:
    client = connect()
    run = run_in_image(client, BASE, RunOptions(allow_cpu=True, command=["sleep", "300"], timeout_s=3))
    assert run.report is None
    assert run.error is not None and "exceeded its timeout of 3s" in run.error
    assert run.duration_s < 60
    assert leftover_containers(docker_client) == []


def test_container_without_a_report_is_an_error_not_a_crash(docker_client: Any) -> None:
    client = connect()
    run = run_in_image(
        client, BASE, RunOptions(allow_cpu=True, command=["sh", "-c", "echo boom >&2; exit 3"], timeout_s=60)
    )
    assert run.exit_code == 3
    assert run.error is not None and "no envcheck report" in run.error and "boom" in run.error
    assert leftover_containers(docker_client) == []


def test_no_daemon_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"DOCKER_HOST": "unix:///nonexistent/docker.sock", "PATH": "/usr/bin:/bin"}
    done = run_cli("image", "verify", "anything", "--allow-cpu", env=env)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "no Docker daemon answers" in done.stderr


def test_an_image_with_a_volume_leaves_no_volume_behind(docker_client: Any) -> None:
    """An image that declares VOLUME (a committed container with a bind mount does too) gets an anonymous volume per
    container; the runner removes it with the container. Before, every `envcheck image verify` of such an image left
    one on the host (seen: two per test session, from the derived image of test_runtime_image)."""
    image, _ = docker_client.images.build(
        fileobj=io.BytesIO(f"FROM {BASE}\nVOLUME /data\n".encode()),
        tag="envcheck-images-test:with-volume",
        rm=True,
    )
    try:
        before = {v.id for v in docker_client.volumes.list()}
        run = run_in_image(connect(), image.id, RunOptions(allow_cpu=True, command=["true"], timeout_s=60))
        assert (
            run.exit_code == 0 and run.report is None
        )  # no envcheck in this image: the run itself is the point
        assert leftover_containers(docker_client) == []
        assert {v.id for v in docker_client.volumes.list()} - before == set()
    finally:
        docker_client.images.remove(image.id, force=True)
