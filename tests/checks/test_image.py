"""image.versions: declared vs installed, with the declaration and the installed set injected."""

from __future__ import annotations

import json
from pathlib import Path

from envcheck.checks.image import compare_versions, read_declared
from envcheck.core.result import Status
from tests.helpers import run_check

DECLARED = {
    "torch": "2.11.0",
    "torchvision": "0.26.0",
    "torchaudio": "2.11.0",
    "cuda": "13.0",
    "python": "3.11",
    "index_url": "https://pypi.org/simple",
    "base_image": "debian:bookworm-slim",
}
ENV = {
    "ENVCHECK_IMAGE": "1",
    "ENVCHECK_TORCH_VERSION": "2.11.0",
    "ENVCHECK_TORCHVISION_VERSION": "0.26.0",
    "ENVCHECK_TORCHAUDIO_VERSION": "2.11.0",
    "ENVCHECK_CUDA_VERSION": "13.0",
}


def installed(**changes: str | None) -> dict[str, str | None]:
    base: dict[str, str | None] = {
        "torch": "2.11.0",
        "torchvision": "0.26.0",
        "torchaudio": "2.11.0",
        "cuda": "13.0",
    }
    return {**base, **changes}


def test_matching_install_passes() -> None:
    result = compare_versions(DECLARED, ENV, lambda: installed())
    assert result.status is Status.PASS, result
    assert "torch 2.11.0 + CUDA 13.0" in result.summary


def test_upgraded_torch_fails_naming_the_drift() -> None:
    result = compare_versions(DECLARED, ENV, lambda: installed(torch="2.13.0+cpu", cuda="cpu"))
    assert result.status is Status.FAIL
    assert "torch 2.13.0 (image declares 2.11.0)" in result.summary
    assert "cuda cpu (image declares 13.0)" in result.summary
    assert result.remediation and "torch==2.11.0 torchvision==0.26.0 torchaudio==2.11.0" in result.remediation


def test_removed_package_and_local_version_label() -> None:
    result = compare_versions(DECLARED, ENV, lambda: installed(torch="2.11.0+cu130", torchaudio=None))
    assert result.status is Status.FAIL
    assert result.summary.endswith("torchaudio missing (image declares 2.11.0)")
    no_audio = {**DECLARED, "torchaudio": ""}
    env = {**ENV, "ENVCHECK_TORCHAUDIO_VERSION": ""}
    assert compare_versions(no_audio, env, lambda: installed(torchaudio=None)).status is Status.PASS


def test_env_contradicting_declaration_fails() -> None:
    result = compare_versions(DECLARED, {**ENV, "ENVCHECK_TORCH_VERSION": "2.9.1"}, lambda: installed())
    assert result.status is Status.FAIL
    assert "ENVCHECK_TORCH_VERSION='2.9.1'" in result.summary


def test_outside_an_image_skips_and_missing_metadata_fails() -> None:
    assert compare_versions(None, {}, lambda: installed()).status is Status.SKIP
    result = compare_versions(None, {"ENVCHECK_IMAGE": "1"}, lambda: installed())
    assert result.status is Status.FAIL and "metadata was removed" in result.summary


def test_read_declared(tmp_path: Path) -> None:
    path = tmp_path / "image.json"
    assert read_declared(path) is None
    path.write_text(json.dumps(DECLARED))
    assert read_declared(path) == DECLARED


def test_registered_check_skips_on_this_host() -> None:
    result = run_check("image.versions")
    assert result.status is Status.SKIP
    assert "not inside an envcheck image" in (result.reason or "")
