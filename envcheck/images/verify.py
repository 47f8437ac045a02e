"""Verify many images: run each, then render one images × checks table, aggregate JSON and JUnit."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from envcheck.core.errors import ExitCode
from envcheck.core.result import SCHEMA_VERSION, Status
from envcheck.core.text import visible
from envcheck.images.docker_run import ImageRun
from envcheck.report.json_report import to_json_dict
from envcheck.report.junit import junit_suite
from envcheck.report.summary import exit_code
from envcheck.report.table import STATUS_STYLES


def image_exit_code(run: ImageRun) -> int:
    """0 when the image ran and no check failed or errored, else 1."""
    if run.error is not None or run.report is None:
        return ExitCode.FAILED
    return exit_code(run.report.results)


def overall_exit_code(runs: Sequence[ImageRun]) -> int:
    """0 only when every image passed."""
    return max((image_exit_code(r) for r in runs), default=ExitCode.OK)


def matrix_table(runs: Sequence[ImageRun]) -> Table:
    """Checks down, images across; a container that produced no report shows its error. Image names, check names
    and errors come from outside (the command line, the container's report, Docker): core.text.visible."""
    table = Table(title="envcheck inside each image")
    table.add_column("check")
    for run in runs:
        table.add_column(Text(visible(run.image)), overflow="fold")
    names: list[str] = []
    for run in runs:
        for result in run.report.results if run.report else []:
            if result.name not in names:
                names.append(result.name)
    for name in names:
        cells = []
        for run in runs:
            found = next((r for r in run.report.results if r.name == name), None) if run.report else None
            cells.append(Text(found.status.value, style=STATUS_STYLES[found.status]) if found else Text("-"))
        table.add_row(Text(visible(name)), *cells)
    table.add_row(
        Text("container", style="bold"),
        *[
            Text(visible(f"error: {r.error}"), style="bold red")
            if r.error
            else Text(f"exit {r.exit_code}, {r.duration_s:.0f}s")
            for r in runs
        ],
    )
    return table


def print_matrix(runs: Sequence[ImageRun], console: Console) -> None:
    """Print the table and, for each warned, failed or errored result, its status, summary and remediation."""
    console.print(matrix_table(runs))
    for run in runs:
        for r in run.report.results if run.report else []:
            if r.status.is_bad or r.status is Status.WARN:
                fix = f" -> {r.remediation}" if r.remediation else ""
                colour = "red" if r.status.is_bad else "yellow"
                console.print(
                    Text.assemble(
                        (visible(run.image), colour),
                        visible(f" {r.name} ({r.status.value}): {r.summary}{fix}"),
                    ),
                    highlight=False,
                )


def aggregate_json(runs: Sequence[ImageRun]) -> str:
    """One document for every image: its container outcome and the report parsed from it."""
    images: list[dict[str, Any]] = []
    for run in runs:
        images.append(
            {
                "image": run.image,
                "error": run.error,
                "container_exit_code": run.exit_code,
                "duration_s": round(run.duration_s, 3),
                "exit_code": image_exit_code(run),
                "notes": run.notes,
                "report": to_json_dict(run.report) if run.report else None,
            }
        )
    doc = {"schema_version": SCHEMA_VERSION, "images": images, "exit_code": overall_exit_code(runs)}
    return json.dumps(doc, indent=2, default=str) + "\n"


def aggregate_junit(runs: Sequence[ImageRun]) -> str:
    """One <testsuite> per image; a container that produced no report is one errored testcase."""
    suites = ET.Element("testsuites")
    for run in runs:
        if run.report is not None:
            suites.append(junit_suite(run.report, suite_name=run.image))
            continue
        suite = ET.SubElement(
            suites,
            "testsuite",
            {
                "name": run.image,
                "tests": "1",
                "failures": "0",
                "errors": "1",
                "skipped": "0",
                "time": f"{run.duration_s:.3f}",
            },
        )
        case = ET.SubElement(
            suite, "testcase", {"classname": run.image, "name": "container", "time": f"{run.duration_s:.3f}"}
        )
        ET.SubElement(case, "error", {"message": run.error or "no report", "type": "error"}).text = run.stderr
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"
