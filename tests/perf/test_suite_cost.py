"""bench/suite_cost.py, the command docs/benchmarks.md gives for the suite's cost table, run as written on the junit
files that `make test`'s phases and streams write (here a real pytest run's, named the way tests/conftest.py names
them)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.helpers import ROOT

INNER = """
import time

import pytest


def test_slow() -> None:
    time.sleep(0.3)


@pytest.mark.timing
def test_quick() -> None:
    pass
"""


def cost(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "bench" / "suite_cost.py"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )


def test_the_base_name_finds_every_phase_s_file_and_the_costliest_test_comes_first(tmp_path: Path) -> None:
    (tmp_path / "test_inner.py").write_text(INNER)
    for phase in ("parallel", "alone"):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                str(tmp_path / "test_inner.py"),
                f"--junitxml={tmp_path / f'suite-{phase}.xml'}",
                "-k",
                "slow" if phase == "parallel" else "quick",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
        )
        assert done.returncode == 0, done.stdout + done.stderr
    done = cost(str(tmp_path / "suite.xml"), "--top", "20")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("2 tests (2 passed); sum of test times"), done.stdout
    assert "suite-parallel.xml: pytest's wall time" in done.stdout and "suite-alone.xml" in done.stdout
    tests = done.stdout.split("### Top 20 tests")[1]
    assert tests.index("test_slow") < tests.index("test_quick"), tests


def test_a_file_that_is_not_junit_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "suite.xml"
    bad.write_text("not xml")
    done = cost(str(bad))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().startswith(f"suite_cost: {bad}: not a junit XML file"), done.stderr
    done = cost(str(tmp_path / "none.xml"))
    assert done.returncode == 1 and done.stderr.count("\n") == 1 and "no such junit file" in done.stderr
