"""Run `python -m envcheck ...` as a user would, and read its report back (validated against the schema)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
# The healthy H100 bundle from the GPU proof run, replayed by the bundle and diagnosis tests.
HEALTHY_H100 = ROOT / "tests" / "checks" / "fixtures" / "bundle_h100_healthy.json"


def run_cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120, python: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `python -m envcheck ARGS` as a user would; never hangs."""
    full_env = dict(os.environ if env is None else env)
    full_env["PYTHONPATH"] = str(ROOT) + os.pathsep + full_env.get("PYTHONPATH", "")
    return subprocess.run(
        [python or sys.executable, "-m", "envcheck", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        cwd=ROOT,
    )


def load_report(text: str) -> dict[str, Any]:
    """Parse a run report's JSON and validate it against the published schema (report_schema.json)."""
    import json

    from envcheck.report.json_report import validate_report

    doc: dict[str, Any] = json.loads(text)
    validate_report(doc)
    return doc


def request_of(*argv: str) -> Any:
    """The typed request `envcheck ARGV` becomes, built where `main` builds it (envcheck.app.requests.Handler)."""
    from envcheck.app.main import build_parser

    parsed = build_parser().parse_args(list(argv))
    return parsed.handler.typed(parsed)
