"""Run one check in the current process: evaluate its needs, call it, turn a crash into ERROR."""

from __future__ import annotations

import importlib.util
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from envcheck.core.check import CheckSpec, Context
from envcheck.core.errors import StartFailure
from envcheck.core.hardening import runtime_cause
from envcheck.core.result import Result, errored, failed, skipped


def unmet_need(spec: CheckSpec) -> str | None:
    """The reason a check cannot apply here, or None when all its needs are met."""
    needs = spec.needs
    if (needs.torch or needs.cuda or needs.min_gpus) and importlib.util.find_spec("torch") is None:
        return "torch is not installed in this Python environment"
    if needs.cuda or needs.min_gpus:
        import torch

        if not torch.cuda.is_available():
            return "no CUDA device is visible (see cuda.available for why)"
        count = int(torch.cuda.device_count())
        if count < needs.min_gpus:
            return f"needs {needs.min_gpus} GPUs, {count} visible"
    return None


CRASH_PREFIX = "check crashed:"  # words for people; the engine reads Result.crashed


@dataclass(frozen=True)
class Outcome:
    """A check's result, and whether an exception escaped it: then this process may be half-changed (a module
    half-imported, an operator half-registered) and must not run another check."""

    result: Result
    raised: bool


def execute(spec: CheckSpec, ctx: Context, diagnose: Callable[[str], Any] | None = None) -> Result:
    """Run `spec` here and now; never raises. `diagnose`: see `Hooks.diagnose`."""
    return run_check(spec, ctx, diagnose).result


def run_check(spec: CheckSpec, ctx: Context, diagnose: Callable[[str], Any] | None = None) -> Outcome:
    """`execute`, telling also whether the check raised (the worker then replaces itself)."""
    start = time.monotonic()
    raised = True
    try:
        why = unmet_need(spec)
        result = skipped(why) if why else spec.func(ctx)
        raised = False
        if not isinstance(result, Result):
            result = errored(f"check returned {type(result).__name__}, not a Result", crashed=True)
    except StartFailure as exc:  # a process could not be started: the cause is the whole story
        what = f"{exc.who}: a process could not be started" if exc.who else "a process could not be started"
        result = runtime_cause(exc, what, trace=False) or errored(str(exc), crashed=True)
    except Exception as exc:
        result = (
            environment_failure(exc, diagnose)
            or runtime_cause(exc)
            or errored(
                f"{CRASH_PREFIX} {type(exc).__name__}: {exc}".splitlines()[0],
                details=traceback.format_exc(),
                crashed=True,
            )
        )
    return Outcome(result.named(spec.name, time.monotonic() - start), raised)


def environment_failure(exc: Exception, diagnose: Callable[[str], Any] | None) -> Result | None:
    """A crash that is the GPU's state, not the check's bug, as `diagnose` tells: FAIL naming the problem and
    the fix. None for anything else."""
    finding = diagnose(str(exc)) if diagnose is not None else None
    if finding is None:
        return None
    return failed(
        finding.problem, finding.fix, details=traceback.format_exc(), fault_class=finding.fault_class
    )


def jsonable(value: Any) -> Any:
    """Best-effort conversion of measured values to JSON-friendly types."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    item = getattr(value, "item", None)
    if callable(item):
        try:
            return item()
        except Exception:
            pass
    return str(value)
