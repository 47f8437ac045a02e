"""A check starts from the state its worker started with, whatever ran before it there.

Real: the engine's fork server and worker, real torch, the real calls that change each knob (tests/core/state_checks);
nothing is staged. Each fault check leaves process-global state changed; the reader after it must see the state the
reader before it saw, in the same worker (same pid) where the state could be put back, in a fresh one where not.
"""

from __future__ import annotations

from envcheck.checks.check_registry import registry
from envcheck.checks.hooks import HOOKS
from envcheck.core.check import CheckSpec, Context, Level
from envcheck.core.isolation.process_state import Saved
from envcheck.core.result import Result, Status
from envcheck.core.runner import Runner
from tests.core import state_checks


def spec(func, group: str = "state") -> CheckSpec:  # type: ignore[no-untyped-def]
    return CheckSpec(f"test.{func.__name__}", func, "process state", timeout_s=60, group=group)


def run(*specs: CheckSpec, level: Level = Level.QUICK) -> list[Result]:
    with Runner(Context(level=level, allow_cpu=True), hooks=HOOKS) as runner:
        return runner.run(specs)


def test_a_check_after_one_that_froze_torch_backends_flags_may_still_set_them() -> None:
    """The hardened full run's ERROR: ops.opdb's import of common_utils froze torch.backends' flags, and
    modules.train_eval (numerics_mode sets cuDNN's allow_tf32) then crashed with 'not allowed to set
    torch.backends.cudnn flags after disable_global_flags'."""
    froze, tf32, train_eval = run(
        spec(state_checks.imports_common_utils),
        spec(state_checks.sets_tf32_flags),
        CheckSpec("modules.train_eval", registry()["modules.train_eval"].func, "real", group="state"),
    )
    assert froze.status is Status.PASS and froze.measured["frozen"] is True
    assert tf32.status is Status.PASS, tf32.summary
    assert train_eval.status is Status.PASS, train_eval.summary


def test_every_knob_a_check_changed_is_put_back_in_the_same_worker() -> None:
    before, _, _, after = run(
        spec(state_checks.reads_state),
        spec(state_checks.changes_everything),
        spec(state_checks.mixes_tf32_apis),
        spec(state_checks.reads_state),
    )
    assert after.measured["pid"] == before.measured["pid"]  # put back, not a fresh worker
    changed = {
        k: (v, after.measured["knobs"].get(k))
        for k, v in before.measured["knobs"].items()
        if after.measured["knobs"].get(k) != v
    }
    assert not changed, changed
    assert after.measured["environ"] == before.measured["environ"]
    assert (
        after.measured["draws"] == before.measured["draws"]
    )  # an unseeded draw does not depend on the order


def test_state_that_cannot_be_put_back_gets_a_fresh_worker() -> None:
    left_open, after = run(spec(state_checks.leaves_inference_mode_open), spec(state_checks.reads_state))
    assert left_open.status is Status.PASS
    assert after.measured["pid"] != left_open.measured["pid"]
    assert after.measured["knobs"]["inference mode (a context left open)"] == "False"


def test_put_back_names_what_moved_and_leaves_nothing_moved() -> None:
    """In this process: the saved state, a change, and put_back's account of it (its healthy twin: no change, no
    name)."""
    import torch

    saved = Saved.take()
    assert saved.put_back() == ([], [])
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        moved, stuck = saved.put_back()
    finally:
        torch.set_default_dtype(before)
        torch.use_deterministic_algorithms(False)
    # (and what the first switch to deterministic algorithms imports: sympy's warning filters; pytest's own
    # PYTEST_CURRENT_TEST in os.environ)
    assert {"default dtype", "deterministic algorithms", "deterministic debug mode"} <= set(moved)
    assert stuck == []
    assert torch.get_default_dtype() is before and not torch.are_deterministic_algorithms_enabled()


def test_torchs_optional_optree_probe_keeps_the_worker() -> None:
    """torch.compile imports torch.utils._cxx_pytree, which fails without optree: an optional probe, not a
    half-changed process. Counting it replaced the compile worker after every compile check (Dynamo's import and
    Inductor's ISA probes paid again each time: compile.cpu_isa 49-61 s on the H100 proof). Its twin, a module that
    fails part-way, still replaces the worker (tests/core/test_poisoned_worker.py)."""
    probed, after = run(spec(state_checks.probes_optree), spec(state_checks.reads_state))
    if probed.measured["optree"]:
        import pytest

        pytest.skip("optree is installed here: torch.utils._cxx_pytree imports")
    assert after.measured["pid"] == probed.measured["pid"]
