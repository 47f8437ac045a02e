"""The engine: a hung, crashing or raising check becomes ERROR, in time, and the rest still run."""

from __future__ import annotations

import time
import uuid

from envcheck.core.check import CheckSpec, Context
from envcheck.core.result import Status
from envcheck.core.runner import Runner
from tests.core import fault_checks
from tests.helpers import processes_with_marker


def spec(func, timeout_s: float = 20.0) -> CheckSpec:  # type: ignore[no-untyped-def]
    return CheckSpec(f"test.{func.__name__}", func, "fault injection", timeout_s=timeout_s, group="faults")


def test_hung_check_becomes_error_within_timeout_and_leaves_no_orphan() -> None:
    marker = uuid.uuid4().hex
    ctx = Context(options={"marker": marker})
    with Runner(ctx) as runner:
        start = time.monotonic()
        result = runner.run_one(spec(fault_checks.sleeps_forever, timeout_s=3))
        elapsed = time.monotonic() - start
        after = runner.run_one(spec(fault_checks.healthy))
    assert result.status is Status.ERROR
    assert "timed out after 3s" in (result.reason or "")
    assert "about to hang" in result.details
    assert elapsed < 3 + 5
    assert after.status is Status.PASS
    deadline = time.monotonic() + 5
    while processes_with_marker(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_with_marker(marker) == []


def test_segfault_and_os_exit_become_error_and_later_checks_run() -> None:
    with Runner(Context()) as runner:
        results = runner.run([spec(fault_checks.segfaults), spec(fault_checks.exits_hard),
                              spec(fault_checks.raises), spec(fault_checks.healthy)])
    seg, hard, raised, ok = results
    assert seg.status is Status.ERROR and "SIGSEGV" in (seg.reason or "")
    assert "about to segfault" in seg.details and "Fatal Python error" in seg.details
    assert hard.status is Status.ERROR and "exited with code 7" in (hard.reason or "")
    assert raised.status is Status.ERROR and "ValueError: boom from a check" in (raised.reason or "")
    assert "Traceback" in raised.details
    assert ok.status is Status.PASS and ok.summary == "fine"


def test_whole_run_timeout_caps_checks_and_marks_the_rest() -> None:
    marker = uuid.uuid4().hex
    with Runner(Context(options={"marker": marker}), total_timeout_s=2) as runner:
        start = time.monotonic()
        hung, never = runner.run([spec(fault_checks.sleeps_forever, 60), spec(fault_checks.healthy)])
        assert time.monotonic() - start < 2 + 5
    assert hung.status is Status.ERROR and "whole-run --timeout" in (hung.reason or "")
    assert never.status is Status.ERROR and "whole-run timeout" in (never.reason or "")


def test_checks_in_one_group_share_one_worker() -> None:
    with Runner(Context()) as runner:
        first, second = runner.run([spec(fault_checks.healthy), spec(fault_checks.healthy)])
    assert first.measured["pid"] == second.measured["pid"]
