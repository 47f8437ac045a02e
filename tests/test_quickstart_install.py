"""The README's "check a host before pulling" quick start, run as written from a fresh clone: `pipx install .` then
`envcheck host`, and the wheel path it names for a machine without the clone (`make dist`, then `pipx install
dist/torch_envcheck-*.whl`), each run outside the clone, so the matrix must come from the installed package.

Real: git, make, build, pipx, pip, the installed envcheck. pipx's home and bin dir are the test's temp dir; nothing is
installed outside it. A machine without a package index skips with that reason (pipx needs rich and packaging)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.test_install_without_torch import NO_INDEX
from tests.helpers import ROOT

# long and install: each builds or installs envcheck into a new venv (pip, pipx, setuptools); `make test` runs them in
# the Docker stream, whose builds are installs too, to even out the two streams that run side by side
pytestmark = [pytest.mark.slow, pytest.mark.long, pytest.mark.install]
README = (ROOT / "README.md").read_text()


def host_block() -> list[str]:
    """The command lines of the README's "Check a host before pulling" block."""
    part = README.split("**Check a host before pulling**", 1)[1]
    block = part.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def wheel_line() -> str:
    """The README's install line for a machine without the clone."""
    (line,) = re.findall(r"`(pipx install dist/[^`]+)`", README)
    return line


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("git") is None or shutil.which("make") is None:
        pytest.skip("git and make are needed to follow the README from a clone")
    where = tmp_path_factory.mktemp("newcomer") / "envcheck"
    subprocess.run(["git", "clone", "-q", "--no-local", str(ROOT), str(where)], check=True, timeout=300)
    return where


def pipx_env(home: Path) -> dict[str, str]:
    """pipx confined to `home`; its bin dir first on PATH, as `pipx ensurepath` would put it."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ENVCHECK_MATRIX", "VIRTUAL_ENV")}
    pipx_bin = Path(sys.executable).parent
    env.update(
        PIPX_HOME=str(home / "pipx"),
        PIPX_BIN_DIR=str(home / "bin"),
        PIPX_MAN_DIR=str(home / "man"),
        PIPX_DEFAULT_PYTHON=sys.executable,
        PATH=f"{home / 'bin'}:{pipx_bin}:{env.get('PATH', '')}",
    )
    return env


def sh(line: str, cwd: Path, env: dict[str, str], timeout: int = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def installed_envcheck_works(home: Path, env: dict[str, str], outside: Path) -> None:
    """`envcheck host` and `envcheck matrix list` from pipx's bin dir, run outside any clone."""
    envcheck = home / "bin" / "envcheck"
    assert envcheck.exists(), sorted(p.name for p in (home / "bin").iterdir())
    host = sh("envcheck host", outside, env, timeout=120)
    assert host.returncode == 0, host.stdout[-2000:] + host.stderr[-2000:]
    assert "Docker GPU setup:" in host.stdout and "latest-runtime" in host.stdout, host.stdout[-2000:]
    listing = sh("envcheck matrix list", outside, env, timeout=120)
    assert listing.returncode == 0 and "2.14-cu130" in listing.stdout, listing.stderr
    assert str(ROOT) not in listing.stdout  # the matrix inside the install, not this checkout's


def test_pipx_install_from_the_clone_then_envcheck_host(clone: Path, tmp_path: Path) -> None:
    lines = host_block()
    assert lines == ["pipx install .", "envcheck host"], lines
    env = pipx_env(tmp_path)
    done = sh(lines[0], clone, env)
    if done.returncode != 0 and any(m in done.stdout + done.stderr for m in NO_INDEX):
        pytest.skip("no package index reachable for pipx's venv (rich, packaging)")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    installed_envcheck_works(tmp_path, env, tmp_path)


def test_make_dist_then_pipx_install_the_wheel(clone: Path, tmp_path: Path) -> None:
    env = pipx_env(tmp_path)
    built = sh("make dist", clone, {**env, "PYTHON": sys.executable})
    if built.returncode != 0 and any(m in built.stdout + built.stderr for m in NO_INDEX):
        pytest.skip("no package index reachable for the build backend")
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    names = sorted(p.name for p in (clone / "dist").iterdir())
    assert len(names) == 2 and names[0].endswith(".whl") and names[1].endswith(".tar.gz"), names
    done = sh(wheel_line(), clone, env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    installed_envcheck_works(tmp_path, env, tmp_path)


def test_the_editable_install_make_verify_runs_prints_no_build_tool_notice(
    clone: Path, tmp_path: Path
) -> None:
    """`make verify` installs envcheck with `pip install -q -e` after upgrading pip: the newest pip shows what the
    build backend warns. A user saw four `project.license` deprecation blocks, then an "Editable installation"
    notice, before the table; the install must print nothing."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    up = subprocess.run(
        [str(venv / "bin/pip"), "install", "-q", "--upgrade", "pip"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if up.returncode != 0 and any(m in up.stderr for m in NO_INDEX):
        pytest.skip("no package index reachable for pip itself")
    done = subprocess.run(
        [str(venv / "bin/pip"), "install", "-q", "-e", "."],
        cwd=clone,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    said = [ln for ln in (done.stdout + done.stderr).splitlines() if not ln.startswith("WARNING: Location ")]
    assert not [ln for ln in said if "Warning" in ln or "!!" in ln or "deprecat" in ln.lower()], "\n".join(
        said
    )
