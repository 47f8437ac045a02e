"""A replayable bundle section: how a host-state check captures its inputs, checks their shape, and judges them.

Every replayable check is a `Section`: `capture()` reads the live system (no torch import unless it needs one),
`validate()` refuses a malformed section with one line, and each of its `verdicts` is a pure function of the
captured data, so the live check (`capture` then the verdict) and `envcheck explain` (a bundle's section then the
verdict) cannot disagree. `envcheck.checks.check_registry.SECTIONS` lists them; `envcheck.evidence` captures and replays them
in one loop, CUDA included. Adding a replayable check is one module that defines its SECTION and CHECKS.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from envcheck.core.check import Context
from envcheck.core.errors import UsageError
from envcheck.core.result import Result

Verdict = Callable[[Mapping[str, Any], Context], Result]


@dataclass(frozen=True)
class Section:
    """One replayable part of the bundle: its key, its reader, its shape check and the checks it judges."""

    key: str  # the bundle's top-level key
    check: str  # the check whose verdict it replays
    capture: Callable[[], dict[str, Any]]
    validate: Callable[
        [Any, str], None
    ]  # raises UsageError naming the first thing wrong ('where' in the text)
    verdict: Verdict
    # More checks judged from the same captured data (cuda.devices from the cuda section).
    also: tuple[tuple[str, Verdict], ...] = ()
    # A bundle without this section is refused (older bundles lack the later sections: they are optional).
    required: bool = False

    def judge(self, ctx: Context) -> Result:
        """The live check: capture here, then the same verdict `envcheck explain` gives."""
        return self.verdict(self.capture(), ctx)

    def replay(self, data: Mapping[str, Any], ctx: Context) -> list[Result]:
        """Every verdict of this section for captured data, each named after its check."""
        pairs = ((self.check, self.verdict), *self.also)
        return [verdict(data, ctx).named(name, 0.0) for name, verdict in pairs]

    @property
    def checks(self) -> tuple[str, ...]:
        """The names of the checks this section replays."""
        return (self.check, *(name for name, _ in self.also))


def require(data: Any, where: str, shape: Mapping[str, tuple[type | None, ...]]) -> None:
    """Raise UsageError unless `data` is an object whose keys in `shape` hold one of their types (None: null).

    Keys missing from `data` are allowed (older bundles); bools are not ints."""
    if not isinstance(data, dict):
        raise UsageError(f"{where} must be an object, got {type(data).__name__}")
    for key, types in shape.items():
        if key not in data:
            continue
        if not is_one_of(data[key], types):
            raise UsageError(f"{where}.{key} must be {type_names(types)}, got {data[key]!r:.60}")


def is_one_of(value: Any, types: tuple[type | None, ...]) -> bool:
    """Whether `value` is one of the JSON `types` (None: null); a bool is not an int."""
    return any(
        (value is None)
        if t is None
        else (isinstance(value, t) and not (t is int and isinstance(value, bool)))
        for t in types
    )


def type_names(types: tuple[type | None, ...]) -> str:
    """'str or null' for (str, None)."""
    return " or ".join("null" if t is None else t.__name__ for t in types)
