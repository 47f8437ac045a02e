"""`envcheck burn` as a user runs it: bad input is one line and exit 2 before any work; Ctrl-C gives the report of
what finished (exit 130) and leaves no worker behind; `--for preflight` exits 3, never 10, when the burn itself failed
(a worker that exits, by the test-only burn hook, tests/helpers/burn_faults.py); the progress shows every device.
A healthy burn with its report, plot and budget, and `--for preflight`'s 10 for wrong bits, are the documented
commands' tests (tests/cluster/test_documented_burn.py).

Real: the command, its worker processes, torch, gloo, the reports. Staged: nothing (CPU workers stand for GPUs).
Cost: the usage errors and the progress run in this process (about 1 s); the two burns about 30 and 15 s on this
loaded 2-core machine.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from envcheck.app.main import main
from envcheck.core.errors import UsageError
from tests.helpers import (
    ROOT,
    burn_faults,
    load_report,
    processes_with_marker,
    request_of,
    run_cli,
    sigint_default,
    wait_for,
)

LIGHT = "matmul.float32,reduce,all_reduce"


@pytest.mark.parametrize(
    "argv, words",
    [
        (["burn", "--budget", "5x"], "'5x' is not a duration; give e.g. 90s, 15m, 4h or 1h30m"),
        (["burn", "--budget", "0s"], "give a duration from 1s to 7d"),
        (["burn", "--allow-cpu", "--only", "matmul,warp"], "--only warp: no such workload"),
        (["burn", "--cpu-workers", "2"], "--cpu-workers applies to a CPU burn: add --allow-cpu"),
        (["burn", "--allow-cpu", "--cpu-workers", "0"], "0: give at least 1 worker (e.g. --cpu-workers 2)"),
        (["burn", "--for", "prolog"], "invalid choice: 'prolog'"),
        (["burn", "--budget", "10s"], "no CUDA device is visible (torch.cuda.device_count() is 0)"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_before_any_work(
    argv: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1 and "Traceback" not in err, err


def test_two_reports_on_stdout_are_refused_where_the_request_is_built() -> None:
    with pytest.raises(UsageError, match="--json and --junit both write to stdout"):
        request_of("burn", "--json", "-", "--junit", "-")
    assert request_of("burn", "--budget", "1h30m").budget == 5400.0


@pytest.mark.slow
def test_ctrl_c_gives_the_report_so_far_and_leaves_no_worker(tmp_path: Path) -> None:
    marker = f"envcheck-burn-test-{os.getpid()}"
    report = tmp_path / "burn.json"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "envcheck",
            "burn",
            "--allow-cpu",
            "--budget",
            "5m",
            "--only",
            LIGHT,
            "--json",
            str(report),
        ],
        env={**os.environ, "PYTHONPATH": str(ROOT), "ENVCHECK_TEST_MARKER": marker},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        preexec_fn=sigint_default,  # Ctrl-C must reach it even when the suite runs as a background job
    )
    try:
        assert wait_for(lambda: len(processes_with_marker(marker)) > len(os.sched_getaffinity(0)), 60)
        time.sleep(4)  # some rounds
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err[-2000:]
    doc = load_report(report.read_text())
    assert doc["facts"]["burn"]["stopped_by"] == "interrupt"
    corruption = next(r for r in doc["results"] if r["name"] == "burn.corruption")
    assert corruption["status"] == "pass" and sum(corruption["measured"]["results"].values()) > 0
    assert "burn.corruption" in out  # the table of what finished
    assert wait_for(lambda: processes_with_marker(marker) == [], 10), processes_with_marker(marker)


@pytest.mark.slow
def test_preflight_exits_3_not_10_when_the_burn_itself_failed() -> None:
    env = {**os.environ, **burn_faults.env("worker=1:exit")}
    done = run_cli(
        "burn", "--allow-cpu", "--budget", "30s", "--only", LIGHT, "--for", "preflight", env=env, timeout=120
    )
    assert done.returncode == 3, done.stderr[-3000:]
    assert "the burn could not judge the node (envcheck's own failure, not the node's)" in done.stderr
    assert "[node]" not in done.stdout


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_progress_shows_each_device_its_figure_and_its_wrong_results_and_redraws_in_place() -> None:
    from envcheck.app.burn_progress import progress_printer
    from envcheck.burn.plan import Plan, Slot
    from envcheck.burn.records import Tally

    tally = Tally(began=0.0, bucket_s=1.0)
    for i in range(2):
        tally.take(
            i, json.dumps({"type": "hello", "kind": "cuda", "index": i, "name": "H100", "model": "H100"})
        )
        tally.take(i, json.dumps({"type": "ready", "workloads": ["matmul.bfloat16"], "skipped": {}}))
        for r in range(3):
            digest = "a" * 32 if (i, r) != (1, 2) else "b" * 32  # GPU 1's third result differs
            tally.take(
                i,
                json.dumps(
                    {
                        "type": "result",
                        "w": "matmul.bfloat16",
                        "r": r,
                        "s": 0,
                        "n": 1,
                        "t": 0.5,
                        "work": 3e14,
                        "d": {digest: 1},
                        "e": {},
                        "at": r + 1.0,
                    }
                ),
            )
    plan = Plan((Slot("cuda:0"), Slot("cuda:1")), 60.0, began=0.0)
    screen = _Terminal()
    show = progress_printer(plan, screen)
    show(tally, 30.0)
    show(tally, 31.0)
    first, second = screen.getvalue().split("\x1b[3F")
    assert first.splitlines() == [
        "\x1b[Kburn [############............]    30/60 s  2 cuda device(s)",
        "\x1b[K  GPU 0          rounds      3  matmul.bfloat16       600 TFLOP/s  wrong 0",
        "\x1b[K  GPU 1          rounds      3  matmul.bfloat16       600 TFLOP/s  wrong 1",
    ]
    assert second.startswith("\x1b[Kburn [############............]    31/60 s")
