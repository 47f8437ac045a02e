"""The release smoke tests' points in the runtime image (PyTorch's CUDA torch with its torchvision, CPU here):
each passes, and torchvision's decoders fail by name once its image extension is gone (a real fault: the
extension file removed in a throwaway container; torchvision then warns "Failed to load image Python extension"
and every decode raises, as when a library it links is missing)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.helpers.containers import run_streams

pytestmark = [pytest.mark.docker, pytest.mark.slow]
POINTS = "build.openmp,build.nvshmem,linalg.svd,numpy.interop,vision.decoders,compile.toolchain"
EXTENSION = "python -c 'import os, torchvision; print(os.path.join(os.path.dirname(torchvision.__file__), \"image.so\"))'"


def results(out: str) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in json.loads(out)["results"]}


def test_the_smoke_test_points_pass_in_the_image(docker_client: Any, runtime_image: str) -> None:
    code, out, err = run_streams(
        docker_client,
        runtime_image,
        ["envcheck", "run", "--allow-cpu", "--level", "full", "--only", POINTS, "--json", "-"],
        timeout_s=300,
    )
    assert code == 0, err[-3000:]
    got = results(out)
    assert {n: r["status"] for n, r in got.items()} == {n: "pass" for n in POINTS.split(",")}, got
    assert got["build.nvshmem"]["measured"]["nvshmem_compiled"] is True  # PyPI's CUDA 13 torch 2.11 has it
    decoders = got["vision.decoders"]["measured"]
    assert decoders["turbo"] is True and decoders["png_exact"] and decoders["webp_exact"]
    assert decoders["jpeg_mean_error"] < 4


def test_decoders_without_torchvisions_image_extension(
    docker_client: Any, runtime_image: str, test_row: Any
) -> None:
    from envcheck.checks.vision_pairing import matching_torchvision

    script = (
        f'rm "$({EXTENSION})" && exec envcheck run --allow-cpu --level full --only vision.decoders,vision.ops '
        "--json -"
    )
    code, out, err = run_streams(docker_client, runtime_image, ["sh", "-c", script], timeout_s=300)
    assert code == 1, err[-3000:]
    got = results(out)
    decoders = got["vision.decoders"]
    assert (decoders["status"], decoders["fault_class"], decoders["code"]) == (
        "fail",
        "image",
        "vision.decoders_missing",
    ), decoders
    pair = f"torch=={test_row.torch} torchvision=={matching_torchvision(test_row.torch)}.*"
    assert f"pip install --force-reinstall {pair}" in decoders["remediation"]
    assert (
        got["vision.ops"]["status"] == "pass"
    )  # its C++ ops (nms, roi_align) are another library: not blamed
