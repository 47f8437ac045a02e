"""The terminal table (rich), with each problem's remediation under its row. Every cell passes through
envcheck.core.text.visible (no raw control character, bidi mark or undecodable byte reaches the terminal)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from envcheck.core.result import Result, Status
from envcheck.core.run_report import RunReport
from envcheck.core.text import visible
from envcheck.report.summary import counts, exit_code

# The one palette for a status wherever envcheck prints one (the run table, `envcheck image verify`'s matrix).
STATUS_STYLES = {
    Status.PASS: "green",
    Status.WARN: "yellow",
    Status.FAIL: "bold red",
    Status.SKIP: "dim",
    Status.ERROR: "bold magenta",
}


def result_table(results: list[Result], title: str = "envcheck") -> Table:
    """Build the rich table for a list of results."""
    table = Table(title=title, show_lines=False, expand=False)
    table.add_column("check", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("summary")
    table.add_column("time", justify="right", no_wrap=True)
    for r in results:
        # Text(): summaries quote real error text (gloo's '[/path/pair.cc:553]'), never rich markup
        status = r.status.value.upper() + (f" ({r.fault_class})" if r.fault_class else "")
        table.add_row(
            Text(visible(r.name)),
            Text(status, style=STATUS_STYLES[r.status]),
            Text(visible(r.summary)),
            f"{r.duration_s:.2f}s",
        )
        if r.remediation and r.status in (Status.FAIL, Status.ERROR, Status.WARN):
            table.add_row("", "", Text(visible(f"fix: {r.remediation}"), style="cyan"), "")
    return table


def print_report(report: RunReport, console: Console | None = None) -> None:
    """Print the table and a one-line verdict."""
    console = console or Console(stderr=False, highlight=False)
    console.print(result_table(report.results))
    tally = counts(report.results)
    verdict = "FAILED" if exit_code(report.results) else "OK"
    console.print(f"{verdict}: " + ", ".join(f"{n} {s}" for s, n in tally.items() if n))


def fact_lines(facts: dict[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    """Flatten nested facts into (key, text) rows; absent values show their reason."""
    rows: list[tuple[str, str]] = []
    for key, value in facts.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and set(value) == {"absent"}:
            rows.append((name, f"— ({value['absent']})"))
        elif isinstance(value, dict):
            rows.extend(fact_lines(value, name + "."))
        elif isinstance(value, list):
            rows.append((name, ", ".join(str(v) for v in value) if value else "(none)"))
        else:
            rows.append((name, str(value)))
    return rows


def print_facts(facts: dict[str, Any], console: Console | None = None) -> None:
    """Print facts as a two-column table."""
    console = console or Console(highlight=False)
    table = Table(title="environment facts")
    table.add_column("fact", no_wrap=True)
    table.add_column("value")
    for key, text in fact_lines(facts):
        table.add_row(Text(visible(key)), Text(visible(text)))
    console.print(table)
