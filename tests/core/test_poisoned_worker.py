"""A worker whose import or initialisation failed is never reused: the next check gets a fresh worker, and there
meets the cause itself instead of the half-imported module's second error.

Real: the engine (fork server, forked workers, the run loop), the interpreter's import machinery. Staged: the
module that fails part-way (tests/core/half_import: a registry that refuses a second registration, as torch's
mega-cache artifact factory does, and tempfile's own error text). The same poisoning with the real torch in a real
read-only mount namespace is tests/hardened/test_poisoned_worker.py.
"""

from __future__ import annotations

import subprocess
import sys

from envcheck.checks.hooks import HOOKS
from envcheck.core.check import CheckSpec, Context
from envcheck.core.result import Status
from envcheck.core.runner import Runner
from tests.core import fault_checks
from tests.helpers import ROOT

ALREADY = "already registered in mega-cache artifact factory"


def spec(func, group: str = "poison", **kw) -> CheckSpec:  # type: ignore[no-untyped-def]
    return CheckSpec(f"test.{func.__name__}", func, "poisoned worker", timeout_s=60, group=group, **kw)


def test_premise_a_second_import_in_the_same_process_hides_the_cause() -> None:
    code = (
        "import sys\nfor _ in range(2):\n    try:\n        import tests.core.half_import.no_temp_dir\n"
        "    except BaseException as exc:\n        print(type(exc).__name__, exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60
    ).stdout
    first, second = out.splitlines()
    assert first.startswith("FileNotFoundError") and "No usable temporary directory" in first
    assert second.startswith("AssertionError") and ALREADY in second


def test_a_check_whose_import_failed_leaves_a_fresh_worker_for_the_next() -> None:
    checks = [
        spec(fault_checks.reports_pid),
        spec(fault_checks.imports_half_way),
        spec(fault_checks.imports_half_way),
        spec(fault_checks.reports_pid),
    ]
    with Runner(Context(), hooks=HOOKS) as runner:
        before, first, second, after = runner.run(checks)
    for result in (first, second):  # the cause both times, never the half-imported module's second error
        assert (result.status, result.code) == (Status.FAIL, "runtime.tmp_readonly"), result
        assert ALREADY not in result.details
    assert after.status is Status.PASS and after.measured["pid"] != before.measured["pid"]


def test_a_failed_import_the_check_caught_itself_still_retires_its_worker() -> None:
    checks = [spec(fault_checks.catches_a_failed_import), spec(fault_checks.imports_half_way)]
    with Runner(Context(), hooks=HOOKS) as runner:
        caught, later = runner.run(checks)
    assert caught.status is Status.FAIL and "No usable temporary directory" in caught.summary
    assert (later.status, later.code) == (Status.FAIL, "runtime.tmp_readonly"), later
    assert ALREADY not in later.details


def test_healthy_twin_an_absent_optional_module_keeps_the_worker() -> None:
    """An optional import that is simply not installed changed nothing: the group keeps its one worker."""
    checks = [spec(fault_checks.tries_an_optional_import), spec(fault_checks.reports_pid)]
    with Runner(Context(), hooks=HOOKS) as runner:
        optional, after = runner.run(checks)
    assert optional.status is Status.PASS and after.status is Status.PASS
    assert optional.measured["pid"] == after.measured["pid"]


def test_a_preload_that_failed_part_way_is_not_inherited_by_later_workers() -> None:
    """On a GPU host the fork server preloads what later GPU groups declare (torch._dynamo for compile.*); one that
    fails part-way there must not reach the workers forked after it. share_gpu=False makes the lane plan of a GPU
    host: the second GPU group declares the preload and is forked after it."""
    first = spec(fault_checks.reports_pid, group="gpu_a", uses_gpu=True)
    later = spec(
        fault_checks.imports_half_way,
        group="gpu_b",
        uses_gpu=True,
        preload=("tests.core.half_import.no_temp_dir",),
    )
    with Runner(Context(), hooks=HOOKS, share_gpu=False) as runner:
        ok, result = runner.run([first, later])
    assert ok.status is Status.PASS
    assert (result.status, result.code) == (Status.FAIL, "runtime.tmp_readonly"), result
    assert ALREADY not in result.details
