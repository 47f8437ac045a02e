"""Load GitHub Actions workflows as data and reason about their `if:` conditions (test helper)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
SHA_PIN = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+@[0-9a-f]{40}$")
VERSION_COMMENT = re.compile(r"#\s*v\d+\.\d+\.\d+\s*$")

# The only facts a publishing condition may rest on: default branch, tags, the weekly schedule.
ALLOWED_GATE_TERMS = frozenset(
    {
        "github.event_name == 'schedule'",
        "startsWith(github.ref, 'refs/tags/')",
        "github.ref == format('refs/heads/{0}', github.event.repository.default_branch)",
        "github.ref == 'refs/heads/main'",
    }
)
PUBLISHING_RUN = re.compile(
    r"\b(cosign (sign|attest)|imagetools create|docker push|make publish-(stage|promote)|make (publish|push)(?=\s|$))"
)


def load(path: Path) -> dict[str, Any]:
    """Parse a workflow; YAML 1.1 reads the key `on` as True, so put it back under 'on'."""
    data = yaml.safe_load(path.read_text())
    if True in data:
        data["on"] = data.pop(True)
    return dict(data)


def workflow(name: str) -> dict[str, Any]:
    """A workflow in .github/workflows by file name."""
    return load(WORKFLOWS / name)


def strip_expression(text: str) -> str:
    """`${{ x }}` -> `x`, whitespace normalised."""
    text = text.strip()
    if text.startswith("${{") and text.endswith("}}"):
        text = text[3:-2]
    return " ".join(text.split())


def _split_top(text: str, operator: str) -> list[str]:
    parts, depth, quoted, start, i = [], 0, False, 0, 0
    while i < len(text):
        ch = text[i]
        if ch == "'":
            quoted = not quoted
        elif not quoted and ch == "(":
            depth += 1
        elif not quoted and ch == ")":
            depth -= 1
        elif not quoted and depth == 0 and text.startswith(operator, i):
            parts.append(text[start:i].strip())
            start = i + len(operator)
            i += len(operator)
            continue
        i += 1
    parts.append(text[start:].strip())
    return parts


def _wraps_whole(text: str) -> bool:
    """Is the first '(' closed by the last character?"""
    if not (text.startswith("(") and text.endswith(")")):
        return False
    depth, quoted = 0, False
    for i, ch in enumerate(text):
        if ch == "'":
            quoted = not quoted
        elif not quoted and ch in "()":
            depth += 1 if ch == "(" else -1
            if depth == 0:
                return i == len(text) - 1
    return False


def _unwrap(text: str) -> str:
    while _wraps_whole(text):
        text = text[1:-1].strip()
    return text


def is_gated(expression: str) -> bool:
    """True only if the expression can hold on nothing but the default branch, tags or the schedule.

    `||` binds looser than `&&`: a disjunction is gated when every disjunct is, a conjunction when any
    conjunct is, and a single term when it is one of ALLOWED_GATE_TERMS (so `!x`, `always()`... are not).
    """
    text = _unwrap(strip_expression(expression))
    disjuncts = _split_top(text, "||")
    if len(disjuncts) > 1:
        return all(is_gated(part) for part in disjuncts)
    conjuncts = _split_top(text, "&&")
    if len(conjuncts) > 1:
        return any(is_gated(part) for part in conjuncts)
    return text in ALLOWED_GATE_TERMS


def condition_is_gated(condition: str | bool | None) -> bool:
    """An `if:` value (string or YAML bool) that is gated; a missing or boolean condition never is."""
    return isinstance(condition, str) and is_gated(condition)


@dataclass(frozen=True)
class Step:
    """One step with the job that holds it."""

    workflow: str
    job_id: str
    job: dict[str, Any]
    index: int
    step: dict[str, Any]

    @property
    def label(self) -> str:
        """Where the step is, for assertion messages."""
        return f"{self.workflow}:{self.job_id}:{self.step.get('name') or self.step.get('uses') or self.index}"

    @property
    def action(self) -> str:
        """The action without its ref ('' for run steps)."""
        return str(self.step.get("uses", "")).split("@")[0]


def steps(name: str) -> Iterator[Step]:
    """Every step of every job of one workflow."""
    for job_id, job in workflow(name)["jobs"].items():
        for index, step in enumerate(job.get("steps", [])):
            yield Step(name, job_id, job, index, step)


def all_workflow_files() -> list[Path]:
    """Every workflow file in the repository."""
    return sorted([*WORKFLOWS.glob("*.yml"), *WORKFLOWS.glob("*.yaml")])


def publishes(step: Step) -> bool:
    """Does this step write to the registry (log in, push, sign, attest, move tags)?"""
    with_ = step.step.get("with", {})
    if step.action == "docker/build-push-action":
        push = with_.get("push", False)
        return push is True or (isinstance(push, str) and push.strip() not in ("false", ""))
    if step.action == "docker/login-action":
        return True
    return bool(PUBLISHING_RUN.search(str(step.step.get("run", ""))))


def publish_is_gated(step: Step) -> bool:
    """The step only runs (or only pushes) on allowed events: job `if`, step `if` or a `push:` expression."""
    if condition_is_gated(step.job.get("if")) or condition_is_gated(step.step.get("if")):
        return True
    push = step.step.get("with", {}).get("push")
    return isinstance(push, str) and "${{" in push and condition_is_gated(push)
