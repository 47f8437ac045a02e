"""`dcgmi diag -j` output, read as each DCGM version's writer (dcgmi/Diag.cpp, NvvsJsonStrings.h) wrote it.

The shapes, by writer version (NVIDIA/DCGM tags):
- root key "DCGM GPU Diagnostic" up to 3.x, "DCGM Diagnostic" from 4.0; `--iterations` wraps the documents in
  {"iterations": [...], "Overall Result": "Pass"|"Fail", "Warning": ...}; a diagnostic DCGM could not run is
  {root: {"version", "runtime_error"}} (HelperDisplayFailureMessage), with no test at all.
- a result names its GPU as `gpu_ids` "0" (2.x-3.2; NVVS's own JSON: an int, or "0,1" for a software test), `gpu_id`
  "0" (3.3; an int in the Deployment category), `entity_group`/`entity_group_id`/`entity_id` (4.x, where a CPU or
  another entity group may stand) or `cpu_id` (3.3's CPU EUD). jsoncpp fills a skipped array index with null.
- messages: `warnings` as one string (2.x-3.2, with a result-level `error_id` from 3.2), as a list of
  {"warning", "error_id", "error_category", "error_severity"} (3.3, 4.x), as {"warnings": text, ...} items in 3.3's
  Deployment category, or a string with result-level id/category/severity there in 3.3.1; `info` a string or a list.
- status: dcgmi writes "Pass", "Skip" and "Fail", and "Fail" for a WARN as well (HelperDisplayDiagResult's default,
  pinned by dcgmi/tests/DiagTests.cpp): only the errors' severities tell a warning from a failure. NVVS writes
  "PASS", "WARN", "SKIP", "FAIL"; 4.6 knows "Not Run". 4.x adds a per-test `test_summary` (status, every error of
  the test, those of no entity included), `entity_groups` (serials) and `metadata`; 3.x "GPU Device Serials".
envcheck.checks.dcgm.document finds the document in dcgmi's output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from envcheck.checks.dcgm import error_codes

ROOT_KEYS = ("DCGM GPU Diagnostic", "DCGM Diagnostic")
RANK = {"skip": 0, "pass": 1, "unknown": 2, "warn": 3, "fail": 4}
_STATUS = {
    "pass": "pass",
    "passed": "pass",
    "warn": "warn",
    "warning": "warn",
    "fail": "fail",
    "failed": "fail",
}
_STATUS |= dict.fromkeys(("skip", "skipped", "not run", "notrun", "not supported"), "skip")


@dataclass(frozen=True)
class DcgmError:
    """One of DCGM's messages: its text and, where given or known, its DCGM_FR_* code, severity and category."""

    text: str
    code: int | None = None
    severity: int | None = None
    category: int | None = None

    @property
    def kind(self) -> str:
        """'fault', 'monitor', 'config', 'internal' or 'unknown' (envcheck.checks.dcgm.error_codes.kind)."""
        return error_codes.kind(self.code, self.severity, self.category)


@dataclass
class TestOutcome:
    """One DCGM test: its worst status ('fail', 'warn', 'unknown', 'pass', 'skip'), the DCGM GPU ids and other
    entities behind a Fail or Warn, its errors and info."""

    name: str
    category: str
    status: str = "skip"
    gpus: list[str] = field(default_factory=list)
    entities: list[str] = field(default_factory=list)
    errors: list[DcgmError] = field(default_factory=list)
    info: list[str] = field(default_factory=list)

    @property
    def code(self) -> str:
        """The stable finding code, e.g. 'dcgm.diag.gpu_memory' for the test 'GPU Memory'."""
        return "dcgm.diag." + (re.sub(r"[^a-z0-9]+", "_", self.name.lower()).strip("_") or "unknown")

    @property
    def error_ids(self) -> list[int]:
        """The DCGM_FR_* codes of its errors."""
        return [e.code for e in self.errors if e.code is not None]


@dataclass
class Diagnostic:
    """A whole document: its tests, DCGM's version and the serial of each DCGM GPU id it names."""

    tests: list[TestOutcome]
    version: str | None = None
    serials: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Unread:
    """No verdict in the output: why, and DCGM's own words where it declined to run (`runtime_error`)."""

    why: str
    refusal: str | None = None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: Any) -> str:
    return " ".join(str(value).split()) if value is not None else ""


def _status(value: Any) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return None
    return _STATUS.get(" ".join(value.lower().replace("_", " ").split()), "unknown")


def _error(text: Any, where: dict[str, Any]) -> DcgmError:
    said = _text(text)
    code = _int(where.get("error_id"))
    return DcgmError(
        said,
        code if code is not None else error_codes.code_of(said),
        _int(where.get("error_severity")),
        _int(where.get("error_category")),
    )


def _errors(entry: dict[str, Any]) -> list[DcgmError]:
    out = []
    for key in ("warnings", "errors"):
        value = entry.get(key)
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, dict):
                out.append(_error(item.get("warning", item.get("warnings", item.get("error"))), item))
            elif isinstance(item, str) and item.strip():
                out.append(_error(item, entry))  # the id, category and severity beside the text (3.2, 3.3.1)
    return [e for e in out if e.text]


def _info(entry: dict[str, Any]) -> list[str]:
    value = entry.get("info")
    return [
        _text(i) for i in (value if isinstance(value, list) else [value]) if isinstance(i, str) and i.strip()
    ]


def _entities(entry: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(the DCGM GPU ids, labels of other entities) a result names."""
    if "entity_id" in entry:
        group, group_id = entry.get("entity_group"), entry.get("entity_group_id")
        if group in (None, "GPU") and group_id in (None, 1):
            return [_text(entry["entity_id"])], []
        return [], [f"{group or f'entity group {group_id}'} {_text(entry['entity_id'])}"]
    if "cpu_id" in entry:
        return [], [f"CPU {_text(entry['cpu_id'])}"]
    for key in ("gpu_id", "gpu_ids"):
        value = entry.get(key)
        ids = value if isinstance(value, list) else str(value).split(",") if value is not None else []
        found = [_text(i) for i in ids if _text(i) and not _text(i).startswith("-")]  # -1: all GPUs
        if found:
            return found, []
    return [], []


def _test(category: str, test: dict[str, Any]) -> TestOutcome:
    out = TestOutcome(_text(test.get("name")) or "?", category)
    statuses = []
    results = test.get("results")
    for entry in results if isinstance(results, list) else []:
        if not isinstance(entry, dict):
            continue  # jsoncpp's null for an index the writer skipped
        status, found = _status(entry.get("status")), _errors(entry)
        statuses += [status] if status else []
        out.errors += found
        out.info += _info(entry)
        if status in ("fail", "warn") or (status is None and found):
            gpus, others = _entities(entry)
            out.gpus += [g for g in gpus if g not in out.gpus]
            out.entities += [o for o in others if o not in out.entities]
    summary = test.get("test_summary")
    if isinstance(summary, dict):  # 4.x: the test's own status and all its errors, those of no entity too
        status = _status(summary.get("status"))
        statuses += [status] if status else []
        out.errors += [e for e in _errors(summary) if e not in out.errors]
        out.info += [i for i in _info(summary) if i not in out.info]
    out.status = max(statuses, key=RANK.__getitem__) if statuses else "skip"
    return out


def _serials(doc: dict[str, Any]) -> dict[str, str]:
    found = doc.get("GPU Device Serials")
    out = {_text(k): _text(v) for k, v in found.items()} if isinstance(found, dict) else {}
    for group in doc.get("entity_groups") or []:
        if isinstance(group, dict) and (
            group.get("entity_group") == "GPU" or group.get("entity_group_id") == 1
        ):
            for e in group.get("entities") or []:
                if isinstance(e, dict) and "entity_id" in e and isinstance(e.get("serial_num"), str):
                    out[_text(e["entity_id"])] = e["serial_num"]
    return {k: v for k, v in out.items() if v and not v.startswith("<<<")}  # <<<NOT_SUPPORTED>>>, <<<NULL>>>


def _version(doc: dict[str, Any], root: dict[str, Any]) -> str | None:
    meta = doc.get("metadata")
    for value in (
        root.get("version"),
        doc.get("version"),
        meta.get("version") if isinstance(meta, dict) else None,
    ):
        if isinstance(value, str) and value:
            return value
    return None


def read(doc: dict[str, Any]) -> Diagnostic | Unread:
    """The tests of one decoded document, or why it holds none."""
    if isinstance(doc.get("iterations"), list):
        runs = [read(d) for d in doc["iterations"] if isinstance(d, dict)]
        tests = [t for r in runs if isinstance(r, Diagnostic) for t in r.tests]
        if tests:
            first = next(r for r in runs if isinstance(r, Diagnostic))
            return Diagnostic(tests, first.version, first.serials)
        said = [r for r in runs if isinstance(r, Unread)]
        overall = f"Overall Result {doc.get('Overall Result')!r} ({_text(doc.get('Warning'))})"
        return said[0] if said else Unread(f"dcgmi's iterations hold no test: {overall}")
    root = next((doc[k] for k in ROOT_KEYS if isinstance(doc.get(k), dict)), None)
    if root is None:
        return Unread(f"dcgmi's JSON has none of {', '.join(ROOT_KEYS)}")
    if root.get("runtime_error"):
        return Unread("DCGM did not run its diagnostic", _text(root["runtime_error"]))
    tests = [
        _test(_text(c.get("category")) or "?", t)
        for c in root.get("test_categories") or []
        if isinstance(c, dict)
        for t in c.get("tests") or []
        if isinstance(t, dict)
    ]
    if not tests:
        return Unread(f"dcgmi's document lists no test (keys: {', '.join(sorted(root))[:120]})")
    return Diagnostic(tests, _version(doc, root), _serials(doc))
