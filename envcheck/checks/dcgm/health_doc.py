"""`dcgmi health -c -j` output, read as each DCGM version's writer (dcgmi/Health.cpp, DcgmiOutput.cpp) wrote it.

The document (jsoncpp's toStyledString: keys sorted, tab indents, " : "), at every tag 2.1.4-4.6.0:
  {"body": {"Overall Health": {"value": W},
            <entity group>: {"children": {<key>: {"value": W, "children": {"Errors": {"children":
                {<system label>: {"value": W, "overflow": [<message chunks>]}}}}}}}},
   "header": ["Health Monitor Report"]}
W is DCGM's word for a health result: "Healthy", "Warning", "Failure" ("Internal error" for any other value). Entity
groups are DcgmFieldsGetEntityGroupString's labels ("GPU", "Switch", "None", "ConnectX", "CPU" ...).

Writers:
- 2.4.7 to 4.6.0 (Health::HandleOneEntity): <key> is the entity id; one row per system, its incidents joined
  with ", "; 4.5.3 adds the "ConnectX system" label. NVSwitch incidents and the devastating XIDs 4.4.2 reports
  under DCGM_HEALTH_WATCH_ALL print as "Internal error" (HelperSystemToString has no case for them).
- 2.1.4 and 2.3.4 (the inline loop of Health::CheckWatches): <key> is the first incident's health *number*
  (`to_string(entityHealth)`: "10", "20"), so GPUs share keys; a system row is written only while the next
  incident belongs to the same entity, so an entity's last system is never printed ("Errors" is then null). Only
  "Overall Health" is reliable there.
Both wrap a message at 54 characters into `overflow` chunks, dropping the separator after each cut; rejoined with a
space here.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from envcheck.checks.dcgm.diag_json import Unread

HEADER = "Health Monitor Report"
OVERALL = "Overall Health"
WORDS = {"Healthy": "pass", "Warning": "warn", "Failure": "fail"}  # Health::HelperHealthToString
NOT_ENABLED = "Health watches not enabled"  # Health::CheckWatches: no watch set on this group


@dataclass(frozen=True)
class SystemRow:
    """One system's row under an entity: dcgmi's label, DCGM's health word and the rejoined message text."""

    label: str
    health: str
    text: str


@dataclass(frozen=True)
class EntityRow:
    """One entity's section: its group label, the key dcgmi wrote for it, its health word and its system rows;
    `errors_null`: an "Errors" node with no rows (the 2.x writer's dropped last system)."""

    group: str
    key: str
    health: str
    systems: tuple[SystemRow, ...]
    errors_null: bool = False


@dataclass(frozen=True)
class HealthDocument:
    """DCGM's overall health word and the entity sections, as printed."""

    overall: str
    entities: tuple[EntityRow, ...]


def rejoin(chunks: Any) -> str:
    """A message from its `overflow` chunks (a string in a hand-written document is taken as it is)."""
    if isinstance(chunks, str):
        return " ".join(chunks.split())
    if not isinstance(chunks, list):
        return ""
    return " ".join(" ".join(str(c).split()) for c in chunks if isinstance(c, str) and c.strip())


def _children(node: Any) -> dict[str, Any]:
    got = node.get("children") if isinstance(node, dict) else None
    return got if isinstance(got, dict) else {}


def _value(node: Any) -> str:
    got = node.get("value") if isinstance(node, dict) else None
    return got if isinstance(got, str) else ""


def read(doc: Any) -> HealthDocument | Unread:
    """The report in a decoded document, or why there is none."""
    body = doc.get("body") if isinstance(doc, dict) else None
    if not isinstance(body, dict) or not isinstance(body.get(OVERALL), dict):
        return Unread("dcgmi's health document has no 'Overall Health'")
    entities = []
    for group, section in body.items():
        if group == OVERALL:
            continue
        for key, entity in _children(section).items():
            errors = _children(entity).get("Errors")
            rows = tuple(
                SystemRow(label, _value(row), rejoin(row.get("overflow") if isinstance(row, dict) else None))
                for label, row in _children(errors).items()
            )
            entities.append(EntityRow(group, key, _value(entity), rows, errors_null=not rows))
    return HealthDocument(_value(body[OVERALL]), tuple(entities))


def find(text: str) -> HealthDocument | Unread:
    """The report in dcgmi's output (text before and after it allowed), or why there is none."""
    decoder = json.JSONDecoder()
    for m in re.finditer(r"^[ \t]*\{", text, re.M):
        try:
            doc, _ = decoder.raw_decode(text, m.end() - 1)
        except ValueError as exc:
            if any(k in text[m.start() :] for k in ('"body"', HEADER, OVERALL)):
                return Unread(
                    f"dcgmi's health document does not decode ({len(text) - m.start()} characters): {exc}"
                )
            continue
        if isinstance(doc, dict) and ("body" in doc or doc.get("header") == [HEADER]):
            return read(doc)
    return Unread(f"no health document in dcgmi's output: {' '.join(text.split())[:200]!r}")
