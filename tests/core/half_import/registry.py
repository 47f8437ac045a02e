"""A registry that refuses a second registration, as torch.compiler._cache.CacheArtifactFactory does."""

from __future__ import annotations

REGISTERED: set[str] = set()


def register(kind: str) -> None:
    """Register `kind` once; a second time raises torch's own assertion text."""
    if kind in REGISTERED:
        raise AssertionError(f"Artifact of type={kind} already registered in mega-cache artifact factory")
    REGISTERED.add(kind)
