"""Nothing of a run stays in the temp dir or the process table, whatever moment a signal ends it.

Real processes, real checks, real signals: the driver runs the real Runner (behind the CLI's error handler) with
container.limits, train.resume and compile.inductor and a check holding a real DataLoader's `pymp-*` dir, in a
private TMPDIR; the test waits until the run has made the kind of dir a killed process leaves behind, signals
it, and then lists the TMPDIR and the processes that carry the run's marker. Before the engine gave its workers
a private temp dir, each of these left its dir behind (bench/signal_leftovers.py prints the figures).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.helpers import ROOT, kill_leftovers, processes_with_marker, wait_for

pytest.importorskip("torch")


def _made(tmp: Path, prefix: str) -> list[str]:
    """Paths under `tmp` (three levels: run dir, worker dir, what a check made) whose name starts with `prefix`."""
    found = []
    for folder, dirs, files in os.walk(tmp):
        depth = len(Path(folder).relative_to(tmp).parts)
        found += [os.path.join(folder, n) for n in dirs + files if n.startswith(prefix)]
        if depth >= 2:
            dirs.clear()
    return found


@pytest.mark.slow
@pytest.mark.parametrize(
    ("sig", "moment"),
    [
        (signal.SIGTERM, "envcheck-run-"),  # the fork server is importing torch; no worker yet
        (signal.SIGHUP, "envcheck-resume-"),  # train.resume holds its checkpoint dir
        (signal.SIGTERM, "pymp-"),  # a DataLoader worker holds multiprocessing's dir
        (signal.SIGHUP, "torchinductor_"),  # Inductor fills its cache
    ],
)
def test_a_signal_at_any_moment_leaves_no_dir_and_no_process(
    tmp_path: Path, sig: signal.Signals, moment: str
) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    marker = f"envcheck-leftover-{uuid.uuid4().hex}"
    env = {**os.environ, "TMPDIR": str(tmp), "ENVCHECK_TEST_MARKER": marker, "CUDA_VISIBLE_DEVICES": ""}
    env.pop("TORCHINDUCTOR_CACHE_DIR", None)
    driver = subprocess.Popen(
        [sys.executable, "-m", "tests.core.leftover_driver"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert wait_for(lambda: _made(tmp, moment), 120), f"the run never made a {moment}* dir"
        where = _made(tmp, moment)
        if moment != "envcheck-run-":  # the premise: a check's dir, inside the worker's private temp dir
            assert all(Path(p).parent.parent.name.startswith("envcheck-run-") for p in where), where
        driver.send_signal(sig)
        _, err = driver.communicate(timeout=30)
        assert driver.returncode == 128 + sig, err
        assert f"stopped by {sig.name}" in err and "Traceback" not in err, err
        assert wait_for(lambda: processes_with_marker(marker) == [], 10), processes_with_marker(marker)
        assert sorted(p.name for p in tmp.iterdir()) == [], f"left behind after {sig.name} at {moment}*"
    finally:
        kill_leftovers(driver, marker)
