"""The fork server started before the command line is read (envcheck.core.isolation.early): which words start it, the
run's Runner adopts it, and a process that ends before any Runner leaves neither it nor its run dir behind. Real: the
fork server, its torch import, the run dir; nothing is staged."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from envcheck.checks.check_registry import registry
from envcheck.checks.hooks import HOOKS
from envcheck.core.check import Context
from envcheck.core.isolation import early
from envcheck.core.result import Status
from envcheck.core.runner import Runner
from tests.helpers import ROOT, processes_with_marker


@pytest.mark.parametrize(
    ("argv", "wanted"),
    [
        ([], True),
        (["run"], True),
        (["--level", "full", "--allow-cpu"], True),
        (["run", "--only", "autograd.mechanics,node.profile"], True),
        (["run", "--only", "node.cuda_driver,node.profile"], False),  # the torch-free node path
        (["run", "--only=node.cuda_driver"], False),
        (["run", "--for", "prolog"], False),
        (["run", "--for=health"], False),
        (["run", "--help"], False),
        (["--version"], False),
        (["list"], False),
        (["facts"], False),
        (["bench", "--quick"], False),
    ],
)
def test_which_words_start_the_server_early(argv: list[str], wanted: bool) -> None:
    assert early.wants_torch_run(argv) is wanted


def test_the_runner_of_the_run_adopts_the_early_server() -> None:
    early.start_early(["run"])
    handle = early._early[0]
    with Runner(Context(allow_cpu=True), hooks=HOOKS) as runner:
        assert runner._server is handle and early.adopt() is None  # adopted once
        result = runner.run_one(registry()["autograd.mechanics"])
    assert result.status is Status.PASS, result.summary
    assert handle.pid is None  # stopped with the run


def test_a_runner_with_its_own_environment_starts_its_own_server() -> None:
    early.start_early(["run"])
    try:
        with Runner(Context(allow_cpu=True), env=dict(os.environ)) as runner:
            assert runner._server is not early._early[0]
    finally:
        adopted = early.adopt()
        if adopted is not None:
            adopted.close()


def test_an_early_server_nobody_adopts_dies_with_the_process(tmp_path: Path) -> None:
    """A usage error ends the process before any Runner exists: the server sees its lifeline close, kills itself and
    removes its run dir."""
    marker = uuid.uuid4().hex
    code = (
        "import sys; from envcheck.core.isolation.early import start_early; start_early(['run']); sys.exit(2)"
    )
    env = {**os.environ, "ENVCHECK_TEST_MARKER": marker, "TMPDIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], env=env, timeout=60, cwd=ROOT, check=False)
    assert done.returncode == 2
    deadline = time.monotonic() + 20
    while (processes_with_marker(marker) or list(tmp_path.iterdir())) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_with_marker(marker) == []
    assert list(tmp_path.iterdir()) == []
