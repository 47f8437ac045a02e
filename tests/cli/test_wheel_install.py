"""The host install the README gives (`pipx install .`, or the wheel `make dist` builds), from a built wheel into a
fresh venv (not editable), run outside any clone: `envcheck --version`, `envcheck host` and `envcheck matrix list`
work there without torch, from the matrix the wheel ships."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.test_install_without_torch import NO_INDEX
from tests.helpers import ROOT

DIST = "torch-envcheck"


@pytest.mark.slow
@pytest.mark.long  # a wheel built and installed into a new venv
@pytest.mark.install  # so `make test` runs it in the Docker stream
def test_built_wheel_installs_and_runs(tmp_path: Path) -> None:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - 3.10
        import tomli as tomllib

    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"] == DIST
    src = tmp_path / "src"  # a copy: setuptools writes build/ and *.egg-info next to the sources it builds
    shutil.copytree(ROOT / "envcheck", src / "envcheck", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ENVCHECK_MATRIX")}
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "dist"), str(src)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env=env,
    )
    if built.returncode != 0 and any(m in built.stderr for m in NO_INDEX):
        pytest.skip("no package index reachable for the isolated build backend")
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("torch_envcheck-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    done = subprocess.run(
        [str(venv / "bin/pip"), "install", "-q", str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    if done.returncode != 0 and any(m in done.stderr for m in NO_INDEX):
        pytest.skip("no package index reachable for rich/packaging")
    assert done.returncode == 0, done.stderr

    def installed(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """The installed wheel's command (`python` or `envcheck`), outside any clone."""
        return subprocess.run(
            [str(venv / "bin" / argv[0]), *argv[1:]],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            cwd=tmp_path,
        )

    where = installed("python", "-c", "import envcheck, sys; print(envcheck.__file__)", timeout=60)
    assert where.stdout.startswith(str(venv)), (
        where.stdout + where.stderr
    )  # the wheel's copy, not the checkout
    version = installed("envcheck", "--version", timeout=60)
    assert version.returncode == 0 and version.stdout.startswith("envcheck "), version.stderr
    host = installed("envcheck", "host")
    assert host.returncode == 0, host.stderr
    # no clone here: the rows come from the matrix inside the wheel
    assert "Docker GPU setup:" in host.stdout and "2.14-cu130" in host.stdout, host.stdout
    shipped = installed("envcheck", "matrix", "list")
    assert shipped.returncode == 0 and "latest-runtime" in shipped.stdout, shipped.stderr
    rows = installed("envcheck", "host", "--matrix", str(ROOT / "docker/matrix.toml"))
    assert rows.returncode == 0 and "2.14-cu130" in rows.stdout, rows.stderr
