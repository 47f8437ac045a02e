"""The shared one-line summary of several problems."""

from __future__ import annotations

from envcheck.core.result import first_of


def test_first_of_names_the_first_and_counts_the_rest() -> None:
    assert first_of(["a broke"]) == "a broke"
    assert first_of(["a broke", "b broke", "c broke"]) == "a broke (+2 more)"
