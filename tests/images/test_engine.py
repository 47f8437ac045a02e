"""The one rule for which docker CLI envcheck, its benches and its tests run."""

from __future__ import annotations

from pathlib import Path

import pytest

from envcheck.core.errors import FatalError
from envcheck.images import engine


def _exe(path: Path) -> str:
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return str(path)


def test_envcheck_docker_then_debians_client_then_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "bin").mkdir()
    on_path = _exe(tmp_path / "bin" / "docker")
    debian = _exe(tmp_path / "debian-docker")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setattr(engine, "DEBIAN_DOCKER", debian)
    monkeypatch.setenv("ENVCHECK_DOCKER", "/opt/my/docker")
    assert engine.docker_binary() == "/opt/my/docker"
    monkeypatch.delenv("ENVCHECK_DOCKER")
    assert engine.docker_binary() == debian
    monkeypatch.setattr(engine, "DEBIAN_DOCKER", str(tmp_path / "absent"))
    assert engine.docker_binary() == on_path


def test_no_docker_cli_is_one_line_with_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ENVCHECK_DOCKER", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(engine, "DEBIAN_DOCKER", str(tmp_path / "absent"))
    assert engine.find_docker() is None
    with pytest.raises(FatalError, match="set ENVCHECK_DOCKER") as err:
        engine.docker_binary()
    assert err.value.exit_code == 2
