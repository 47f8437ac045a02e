"""A replayable bundle section: how a host-state check captures its inputs, checks their shape, and judges them.

The CUDA diagnosis was the first such check (its `cuda` section predates this contract). Every later one is a
`Section`: `capture()` reads the live system (no torch import unless it needs one), `validate()` refuses a
malformed section with one line, and `verdict()` is a pure function of the captured data, so the live check
(`capture` then `verdict`) and `envcheck explain` (a bundle's section then `verdict`) cannot disagree.
`envcheck.checks.sections.SECTIONS` lists them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from envcheck.core.check import Context
from envcheck.core.result import Result
from envcheck.errors import UsageError


@dataclass(frozen=True)
class Section:
    """One replayable part of the bundle."""

    key: str  # the bundle's top-level key
    check: str  # the check whose verdict it replays
    capture: Callable[[], dict[str, Any]]
    validate: Callable[[Any, str], None]  # raises UsageError naming the first thing wrong ('where' in the text)
    verdict: Callable[[Mapping[str, Any], Context], Result]

    def judge(self, ctx: Context) -> Result:
        """The live check: capture here, then the same verdict `envcheck explain` gives."""
        return self.verdict(self.capture(), ctx)


def require(data: Any, where: str, shape: Mapping[str, tuple[type | None, ...]]) -> None:
    """Raise UsageError unless `data` is an object whose keys in `shape` hold one of their types (None: null).

    Keys missing from `data` are allowed (older bundles); bools are not ints."""
    if not isinstance(data, dict):
        raise UsageError(f"{where} must be an object, got {type(data).__name__}")
    for key, types in shape.items():
        if key not in data:
            continue
        value = data[key]
        if not any((value is None) if t is None else (isinstance(value, t) and not (t is int and
                                                                                isinstance(value, bool)))
                   for t in types):
            names = " or ".join("null" if t is None else t.__name__ for t in types)
            raise UsageError(f"{where}.{key} must be {names}, got {value!r:.60}")
