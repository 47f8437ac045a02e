"""Build paths on the real engine, exercised on the small envcheck-wheel stage (pip + setuptools):
offline from the wheelhouse image (pip --no-index), online through this machine's TLS-intercepting
proxy with the CA bundle as a BuildKit secret, and a clear failure for OFFLINE=1 without wheels."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from envcheck.images import build as builder
from envcheck.images.matrix import Row
from tests.helpers.containers import CA_BUNDLE, TEST_BASE, build_image

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def build_wheel_stage(
    row: Row, *, offline: bool, wheelhouse: str | None, ca: Path | None, network: str | None = None
) -> subprocess.CompletedProcess[str]:
    req = builder.BuildRequest(
        row=row,
        target="runtime",
        base_image=TEST_BASE,
        offline=offline,
        wheelhouse_image=wheelhouse,
        ca_bundle=ca,
        network=network,
        repo="envcheck-images-test",
    )
    cmd = builder.build_command(req)
    cmd[cmd.index("--target") + 1] = "envcheck-wheel"  # an internal stage: small, quick to re-run
    cmd = [*cmd[:-1], "--build-arg", f"WHEEL_CACHE_BUST={time.time_ns()}", "--progress=plain", cmd[-1]]
    cmd = [c for i, c in enumerate(cmd) if not (c == "-t" or (i and cmd[i - 1] == "-t"))]
    return subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        env={**os.environ, "DOCKER_BUILDKIT": "1"},
    )


def test_build_commands_carry_the_row_and_never_the_secret_content(test_row: Row) -> None:
    req = builder.BuildRequest(
        row=test_row,
        target="runtime",
        base_image="local/debian:bookworm",
        offline=True,
        ca_bundle=CA_BUNDLE,
        wheelhouse_image="envcheck-wheelhouse:x",
    )
    cmd = builder.build_command(req, docker="docker")
    assert f"TORCH_VERSION={test_row.torch}" in cmd and "OFFLINE=1" in cmd
    assert "BASE_IMAGE=local/debian:bookworm" in cmd and "WHEELHOUSE_IMAGE=envcheck-wheelhouse:x" in cmd
    assert f"id=ca,src={CA_BUNDLE}" in cmd
    assert not any("BEGIN CERTIFICATE" in c for c in cmd)


def test_two_builds_of_one_tree_with_one_date_are_one_image(
    test_row: Row, ca_with_marker: Path, docker_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What lets `make test`'s two Docker sessions share the images: the second build with the run's date is a cache
    hit that gives the very same image, so its tag does not move (tests/helpers/containers.py). Under `make test`
    both builds are cache hits of the session's image."""
    monkeypatch.setenv(
        "ENVCHECK_TEST_BUILD_DATE", os.environ.get("ENVCHECK_TEST_BUILD_DATE") or "2026-11-30T06:00:00Z"
    )
    first = docker_client.images.get(build_image(test_row, "runtime", ca_with_marker, docker_client)).id
    second = docker_client.images.get(build_image(test_row, "runtime", ca_with_marker, docker_client)).id
    assert first == second


def test_offline_build_uses_only_the_wheelhouse(test_row: Row, docker_client: Any) -> None:
    """OFFLINE=1 means pip --no-index: only /wheels is searched (the build backend too), no index.
    (`--network none` cannot be shown here: BuildKit keys cache on the network mode, so the apt step
    of the base stage would re-run without a network.)"""
    wheelhouse = builder.wheelhouse_image(test_row)
    try:
        docker_client.images.get(wheelhouse)
    except Exception:
        pytest.fail(f"{wheelhouse} is missing; run `make wheelhouse ROW={test_row.id}`")
    done = build_wheel_stage(test_row, offline=True, wheelhouse=wheelhouse, ca=None)
    assert done.returncode == 0, done.stderr[-3000:]
    pip_lines = done.stderr[done.stderr.index("RUN --mount=type=secret,id=ca,required=false,uid=1000") :]
    assert "Looking in links: /wheels" in pip_lines, pip_lines[-3000:]
    assert "Successfully built torch-envcheck" in pip_lines, pip_lines[-3000:]  # the distribution's name
    assert "Looking in indexes" not in pip_lines and "Downloading" not in pip_lines


def test_offline_without_wheels_fails_with_the_fix(test_row: Row) -> None:
    done = build_wheel_stage(test_row, offline=True, wheelhouse=None, ca=None)
    assert done.returncode != 0
    assert "OFFLINE=1 but the WHEELHOUSE_IMAGE holds no wheels; run: make wheelhouse" in done.stderr


def test_online_build_through_the_proxy_needs_the_ca_secret(test_row: Row) -> None:
    """This machine reaches PyPI through a TLS-intercepting proxy: only the secret CA makes pip work."""
    with_ca = build_wheel_stage(test_row, offline=False, wheelhouse=None, ca=CA_BUNDLE)
    assert with_ca.returncode == 0, with_ca.stderr[-3000:]
    without = build_wheel_stage(test_row, offline=False, wheelhouse=None, ca=None)
    if without.returncode == 0:
        pytest.skip("PyPI is reachable without an extra CA here (no intercepting proxy to prove against)")
    assert "CERTIFICATE_VERIFY_FAILED" in without.stderr or "SSL" in without.stderr
