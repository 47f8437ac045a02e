"""Checks for the container domain (filled in by the engine issue)."""

from __future__ import annotations

from envcheck.core.check import CheckSpec

CHECKS: tuple[CheckSpec, ...] = ()
