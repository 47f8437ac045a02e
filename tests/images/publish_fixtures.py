"""Small images for the publish tests: FROM local/debian:bookworm with a stand-in `envcheck` that prints a
report the real envcheck produced on this host (a pass, or a real net.ifname failure). They exercise the
registry mechanics only; test_publish_runtime.py verifies the real runtime image end to end."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from envcheck.images.engine import find_docker
from tests.helpers import run_cli

STANDIN = "envcheck-publish-test"
CHECKS = "container.shm,net.ifname"


def real_report(fail: bool) -> tuple[str, int]:
    """The real envcheck's JSON on this host; `fail` names an interface that does not exist (NCCL_SOCKET_IFNAME)."""
    env = {**os.environ, "NCCL_SOCKET_IFNAME": "envcheck-no-such-if0"} if fail else None
    done = run_cli("run", "--json", "-", "--only", CHECKS, "--allow-cpu", env=env)
    assert done.returncode == (1 if fail else 0), done.stderr
    return done.stdout, done.returncode


def build_standin(root: Path, name: str, report: str, code: int) -> str:
    """Build STANDIN:<name>; the variant name is in the image so every variant has its own digest."""
    ctx = root / name
    ctx.mkdir()
    (ctx / "report.json").write_text(report)
    (ctx / "envcheck").write_text(f"#!/bin/sh\ncat /report.json\nexit {code}\n")
    (ctx / "Dockerfile").write_text(
        "FROM local/debian:bookworm\nCOPY --chmod=755 envcheck /usr/local/bin/envcheck\n"
        f"COPY report.json /report.json\nLABEL io.envcheck.test.variant={name}\n"
    )
    ref = f"{STANDIN}:{name}"
    done = subprocess.run(
        [find_docker() or "docker", "build", "-q", "-t", ref, str(ctx)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "DOCKER_BUILDKIT": "1"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return ref


@pytest.fixture(scope="module")
def standins(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """pass-a, pass-b, pass-c (passing, distinct digests) and fail; removed afterwards."""
    root = tmp_path_factory.mktemp("standins")
    passing, failing = real_report(False), real_report(True)
    images = {name: build_standin(root, name, *passing) for name in ("pass-a", "pass-b", "pass-c")}
    images["fail"] = build_standin(root, "fail", *failing)
    yield images
    subprocess.run(
        [find_docker() or "docker", "image", "rm", "-f", *images.values()],
        capture_output=True,
        timeout=120,
        check=False,
    )
