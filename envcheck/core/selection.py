"""Which checks a run runs: --only/--skip names against the registry, and the level."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from envcheck.core.check import CheckSpec, Level
from envcheck.core.errors import UsageError


def parse_names(text: str | None) -> list[str]:
    """Split a comma-separated --only/--skip value."""
    return [n.strip() for n in (text or "").split(",") if n.strip()]


def select(
    registry: Mapping[str, CheckSpec], level: Level, only: Iterable[str] = (), skip: Iterable[str] = ()
) -> list[CheckSpec]:
    """The checks to run, in registry order. Unknown names are a usage error listing valid ones."""
    only, skip = list(only), list(skip)
    unknown = [n for n in [*only, *skip] if n not in registry]
    if unknown:
        raise UsageError(f"unknown check name(s): {', '.join(unknown)}; valid names: {', '.join(registry)}")
    if only:
        chosen = [registry[n] for n in registry if n in only]
    else:
        chosen = [s for s in registry.values() if level is Level.FULL or s.level is Level.QUICK]
    return [s for s in chosen if s.name not in skip]
