"""What one run produced: the one input of every report format (table, JSON, JUnit) and of the image runner."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from envcheck.core.check import Context
from envcheck.core.result import Result


@dataclass
class RunReport:
    """Everything one run produced; every report format renders this."""

    results: list[Result]
    facts: dict[str, Any] = field(default_factory=dict)
    context: Context = field(default_factory=Context)
