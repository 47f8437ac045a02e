"""`dcgmi diag -j` output, read: per test, its status and the GPUs and messages behind a Fail or Warn.

Two shapes are real: DCGM 3.x puts everything under "DCGM GPU Diagnostic", each test's `results` list carrying a
`gpu_id` (or `gpu_ids`), a `status` ("Pass", "Fail", "Warn", "Skip") and `warnings` [{"warning", "error_id"}]
(NVIDIA/DCGM#139; DCGM's own test reader names the same fields: name, results, warnings, status, info, gpu_ids);
DCGM 4.x renamed the key "DCGM Diagnostic" and adds a per-test `test_summary` status and `entity_id` results
(facebookresearch/gcm#38, citing DCGM's 4.0 breaking changes). Like DCGM's test reader (`trimJsonText`), the
document is taken from the first '{' to the last '}'.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

ROOT_KEYS = ("DCGM GPU Diagnostic", "DCGM Diagnostic")
BAD = {"fail": "fail", "warn": "warn", "warning": "warn"}


@dataclass
class TestOutcome:
    """One DCGM test's verdict: 'fail', 'warn' or 'pass' (skips count as pass), the GPUs behind it, its messages."""

    name: str
    category: str
    status: str = "pass"
    gpus: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    error_ids: list[int] = field(default_factory=list)

    @property
    def code(self) -> str:
        """The stable finding code, e.g. 'dcgm.diag.gpu_memory' for the test 'GPU Memory'."""
        return "dcgm.diag." + (re.sub(r"[^a-z0-9]+", "_", self.name.lower()).strip("_") or "unknown")


def _status(entry: Any) -> str:
    return (
        BAD.get(str(entry.get("status", "")).strip().lower(), "pass") if isinstance(entry, dict) else "pass"
    )


def _gpu(entry: dict[str, Any]) -> list[str]:
    for key in ("gpu_id", "entity_id"):
        if key in entry:
            return [str(entry[key])]
    ids = entry.get("gpu_ids")
    return [str(i) for i in ids] if isinstance(ids, list) else []


def _messages(entry: dict[str, Any]) -> tuple[list[str], list[int]]:
    texts, ids = [], []
    for key, inner in (("warnings", "warning"), ("errors", "error")):
        for item in entry.get(key) or []:
            text = item.get(inner) if isinstance(item, dict) else item
            if text:
                texts.append(" ".join(str(text).split()))
            code = item.get("error_id") if isinstance(item, dict) else None
            if isinstance(code, int):
                ids.append(code)
    return texts, ids


def _test(category: str, test: dict[str, Any]) -> TestOutcome:
    out = TestOutcome(str(test.get("name", "?")), category)
    results = [r for r in test.get("results") or [] if isinstance(r, dict)]
    statuses = [_status(r) for r in results] + [_status(test.get("test_summary"))]
    out.status = "fail" if "fail" in statuses else "warn" if "warn" in statuses else "pass"
    for r in results:
        if _status(r) != "pass":
            out.gpus += [g for g in _gpu(r) if g not in out.gpus]
        texts, ids = _messages(r)
        out.messages += texts
        out.error_ids += ids
    texts, ids = _messages(test.get("test_summary") or {})
    out.messages += texts
    out.error_ids += ids
    return out


def parse(text: str) -> list[TestOutcome] | str:
    """Every test's outcome, or why the output is not a DCGM diagnostic document."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        return f"no JSON in dcgmi's output: {' '.join(text.split())[:200]!r}"
    try:
        doc = json.loads(text[start : end + 1])
    except ValueError as exc:
        return f"dcgmi's JSON does not parse: {exc}"
    root = next((doc[k] for k in ROOT_KEYS if isinstance(doc, dict) and isinstance(doc.get(k), dict)), None)
    if root is None:
        return f"dcgmi's JSON has none of {', '.join(ROOT_KEYS)}"
    outcomes = []
    for category in root.get("test_categories") or []:
        if isinstance(category, dict):
            name = str(category.get("category", "?"))
            outcomes += [_test(name, t) for t in category.get("tests") or [] if isinstance(t, dict)]
    return outcomes
