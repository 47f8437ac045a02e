"""`envcheck image verify` prints the summary and fix of every non-pass row, WARN included."""

from __future__ import annotations

import io

from rich.console import Console

from envcheck.core.result import failed, passed, skipped, warned
from envcheck.core.run_report import RunReport
from envcheck.images.docker_run import ImageRun
from envcheck.images.verify import print_matrix


def test_warn_fail_and_error_rows_print_their_summary_and_fix() -> None:
    report = RunReport(
        [
            passed("fine").named("a.pass", 0.1),
            warned("shm is 64 MiB [small]", "run with --shm-size=8g").named("container.shm", 0.1),
            failed("broken", "reinstall").named("a.fail", 0.1),
            skipped("no gpu").named("a.skip", 0.0),
        ]
    )
    buf = io.StringIO()
    print_matrix([ImageRun(image="img:1", report=report, exit_code=1)], Console(file=buf, width=300))
    lines = buf.getvalue().splitlines()
    assert "img:1 container.shm (warn): shm is 64 MiB [small] -> run with --shm-size=8g" in lines
    assert "img:1 a.fail (fail): broken -> reinstall" in lines
    assert not any(line.startswith("img:1 a.pass") or line.startswith("img:1 a.skip") for line in lines)
