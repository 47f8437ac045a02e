"""The render-and-write block every front door shares (`run`, `explain`, the multi-node entry): the table on the
terminal, then each requested report written on its own through the one writer (envcheck.app.output), so one
failing output never loses the others; the failures come back as one-line messages."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Protocol

from envcheck.app.output import write_reports
from envcheck.app.requests import Request
from envcheck.app.terminal import Terminal
from envcheck.core.run_report import RunReport
from envcheck.report.json_report import render_json
from envcheck.report.junit import render_junit
from envcheck.report.table import print_report


class ReportPaths(Protocol):
    """A request that may write the JSON and JUnit reports (`--json`, `--junit`; None: not asked for)."""

    @property
    def json(self) -> str | None: ...

    @property
    def junit(self) -> str | None: ...


def terminal(request: Request, to_stderr: bool = False) -> Terminal:
    """The table's console: stderr when a report goes to stdout (or `to_stderr`), 140 columns when not a tty."""
    return Terminal(
        stderr=request.report_on_stdout or to_stderr,
        highlight=False,
        width=None if sys.stdout.isatty() else 140,
    )


def report_files(
    report: RunReport, paths: ReportPaths, suite_name: str = "envcheck"
) -> list[tuple[str | None, Callable[[], str]]]:
    """The (path, render) pairs of the reports the request asks for (`--json`, `--junit`)."""
    return [
        (paths.json, lambda: render_json(report)),
        (paths.junit, lambda: render_junit(report, suite_name=suite_name)),
    ]


def show_and_write(
    report: RunReport, paths: ReportPaths, console: Terminal, suite_name: str = "envcheck"
) -> list[str]:
    """Print the table, then write every requested report; the one-line failures (none: all written)."""
    print_report(report, console)
    return write_reports(report_files(report, paths, suite_name))
