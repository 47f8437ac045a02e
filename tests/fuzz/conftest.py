"""Hypothesis settings for tests/fuzz: derandomized (the same cases on every run, so CI is reproducible) and few
examples per test, so the whole folder stays well under 30 s."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

settings.register_profile(
    "envcheck-fuzz",
    derandomize=True,
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
)
settings.load_profile("envcheck-fuzz")
