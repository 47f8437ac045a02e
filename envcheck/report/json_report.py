"""JSON report: the machine-readable form of a RunReport, and its parser (used by the Docker runner)."""

from __future__ import annotations

import json
from typing import Any

from envcheck import __version__
from envcheck.core.check import Context
from envcheck.core.result import SCHEMA_VERSION, Result
from envcheck.core.run_report import RunReport
from envcheck.errors import FatalError
from envcheck.report.summary import exit_code

RESULT_KEYS = ("name", "status", "summary", "measured", "expected", "remediation", "reason", "details",
               "duration_s")


def to_json_dict(report: RunReport) -> dict[str, Any]:
    """The JSON document as a dict."""
    return {
        "schema_version": SCHEMA_VERSION,
        "envcheck_version": __version__,
        "context": report.context.to_dict(),
        "results": [{k: r.to_dict()[k] for k in RESULT_KEYS} for r in report.results],
        "facts": report.facts,
        "exit_code": exit_code(report.results),
    }


def render_json(report: RunReport) -> str:
    """Serialise a report (indented, stable key order)."""
    return json.dumps(to_json_dict(report), indent=2, default=str) + "\n"


def parse_report(text: str) -> RunReport:
    """Parse a JSON report back into the result model; bad input is a FatalError."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FatalError(f"report is not valid JSON ({exc.msg} at line {exc.lineno})", 1) from None
    if not isinstance(data, dict) or "results" not in data:
        raise FatalError("report JSON has no 'results' list", 1)
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise FatalError(f"report schema_version {version!r} is not {SCHEMA_VERSION}; upgrade envcheck", 1)
    try:
        results = [Result.from_dict(r) for r in data["results"]]
    except (KeyError, ValueError, TypeError) as exc:
        raise FatalError(f"report has a malformed result: {exc}", 1) from None
    return RunReport(results=results, facts=dict(data.get("facts") or {}),
                     context=Context.from_dict(data.get("context") or {}))
