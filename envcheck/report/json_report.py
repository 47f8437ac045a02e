"""JSON report: the machine-readable form of a RunReport, and its parser (used by the Docker runner)."""

from __future__ import annotations

import importlib.util
import json
import os
from importlib import resources
from typing import Any

from envcheck import __version__
from envcheck.core.check import Context
from envcheck.core.errors import ExitCode, FatalError
from envcheck.core.redact import redact_deep
from envcheck.core.result import SCHEMA_MINOR, SCHEMA_VERSION, Result
from envcheck.core.run_report import RunReport
from envcheck.report.summary import counts, exit_code, verdict

RESULT_KEYS = (
    "name",
    "status",
    "summary",
    "measured",
    "expected",
    "remediation",
    "reason",
    "details",
    "duration_s",
    "fault_class",
    "code",
    "restart_worker",
    "crashed",
)
READABLE_VERSIONS = (1, SCHEMA_VERSION)  # 1 lacks verdict/counts, which parsing does not need
VALIDATE_ENV = "ENVCHECK_VALIDATE_REPORTS"  # "1": validate every rendered report against the schema (tests)


def result_json(result: Result) -> dict[str, Any]:
    """One result as the report writes it (RESULT_KEYS, in that order), serialised once."""
    data = result.to_dict()
    return {k: data.get(k) for k in RESULT_KEYS}


def to_json_dict(report: RunReport) -> dict[str, Any]:
    """The JSON document as a dict (it follows report_schema.json)."""
    doc = {
        "schema_version": SCHEMA_VERSION,
        "schema_minor": SCHEMA_MINOR,
        "envcheck_version": __version__,
        "verdict": verdict(report.results),
        "counts": counts(report.results),
        "context": report.context.to_dict(),
        "results": redact_deep([result_json(r) for r in report.results]),
        "facts": redact_deep(report.facts),
        "exit_code": exit_code(report.results),
    }
    if os.environ.get(VALIDATE_ENV) == "1" and importlib.util.find_spec("jsonschema") is not None:
        validate_report(doc)  # the tests set it (tests/conftest.py), so every report they produce is checked
    return doc


def schema() -> dict[str, Any]:
    """The JSON Schema of the run report (shipped in the package as report_schema.json)."""
    loaded: dict[str, Any] = json.loads(
        resources.files("envcheck.report").joinpath("report_schema.json").read_text()
    )
    return loaded


def validate_report(doc: Any) -> None:
    """Raise jsonschema.ValidationError unless `doc` follows the schema (needs the jsonschema package)."""
    import jsonschema  # a test dependency only: rendering never needs it unless ENVCHECK_VALIDATE_REPORTS=1

    jsonschema.validate(json.loads(json.dumps(doc, default=str)), schema())


def render_json(report: RunReport) -> str:
    """Serialise a report (indented, stable key order)."""
    return json.dumps(to_json_dict(report), indent=2, default=str) + "\n"


def parse_report(text: str) -> RunReport:
    """Parse a JSON report back into the result model; bad input is a FatalError."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FatalError(
            f"report is not valid JSON ({exc.msg} at line {exc.lineno})", ExitCode.FAILED
        ) from None
    if not isinstance(data, dict) or "results" not in data:
        raise FatalError("report JSON has no 'results' list", ExitCode.FAILED)
    version = data.get("schema_version")
    if version not in READABLE_VERSIONS:
        raise FatalError(
            f"report schema_version {version!r} is not one of {READABLE_VERSIONS}; upgrade envcheck",
            ExitCode.FAILED,
        )
    try:
        results = [Result.from_dict(r) for r in data["results"]]
    except (KeyError, ValueError, TypeError) as exc:
        raise FatalError(f"report has a malformed result: {exc}", ExitCode.FAILED) from None
    return RunReport(
        results=results,
        facts=dict(data.get("facts") or {}),
        context=Context.from_dict(data.get("context") or {}),
    )
