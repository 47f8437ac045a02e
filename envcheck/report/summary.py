"""Counting results and mapping them to the run's exit code."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from envcheck.core.errors import ExitCode
from envcheck.core.result import Result, Status


def exit_code(results: Iterable[Result]) -> ExitCode:
    """0 when nothing failed or errored, else 1."""
    return ExitCode.FAILED if any(r.status.is_bad for r in results) else ExitCode.OK


def counts(results: Iterable[Result]) -> dict[str, int]:
    """How many results of each status, in a fixed order."""
    seen = Counter(r.status for r in results)
    return {s.value: seen.get(s, 0) for s in Status}


def verdict(results: Iterable[Result]) -> str:
    """The run's overall verdict: fail (anything failed or errored), warn (anything warned), else pass."""
    statuses = {r.status for r in results}
    if any(s.is_bad for s in statuses):
        return "fail"
    return "warn" if Status.WARN in statuses else "pass"
