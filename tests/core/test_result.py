"""The shared one-line summary of several problems."""

from __future__ import annotations

from envcheck.core.result import Result, errored, failed, first_of


def test_first_of_names_the_first_and_counts_the_rest() -> None:
    assert first_of(["a broke"]) == "a broke"
    assert first_of(["a broke", "b broke", "c broke"]) == "a broke (+2 more)"


def test_crashed_is_a_typed_flag_kept_only_on_an_error() -> None:
    crash = errored("check crashed: ValueError: boom", crashed=True)
    assert crash.crashed and Result.from_dict(crash.to_dict()).crashed
    # a crash the check's own hook turned into a finding is that finding, not envcheck's failure
    assert not failed("GPU is lost", "reset it", crashed=True).crashed
    # the words alone make no crash: nothing reads the summary
    assert not errored("check crashed: said in words only").crashed
