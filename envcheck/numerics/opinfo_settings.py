"""What an OpInfo says about its own tests, read as PyTorch's test suite reads it (ops.opdb honours it).

An OpInfo (torch/testing/_internal/opinfo/core.py) carries `decorators` (its `skips` are appended to them):
`DecorateInfo(decorators, cls_name, test_name, device_type=, dtypes=, active_if=)` applies its decorators to the
tests it matches (`DecorateInfo.is_active`); a bare decorator applies to every test. ops.opdb's comparisons stand
for these PyTorch tests:
- backward: TestBwdGradients.test_fn_grad (test_ops_gradients.py), float64;
- double backward: TestBwdGradients.test_fn_gradgrad, float64;
- float32 forward against a reference: TestCommon.test_compare_cpu (the device against CPU) and
  TestCommon.test_numpy_ref (against a float64 reference), float32.
A decorator is read by applying it to a stand-in function: `unittest.skip` marks it skipped (`__unittest_skip__`),
`unittest.expectedFailure` expected to fail, `toleranceOverride`/`precisionOverride` set tolerances. Anything else
(skipIfRocm, skipCUDAIf, ...) needs a live TestCase and is not read. A skip or expected failure counts when it
matches every test a comparison stands for; tolerances from any of them. Tolerances only widen ops.opdb's own bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

Test = tuple[str, str]
BACKWARD: tuple[Test, ...] = (("TestBwdGradients", "test_fn_grad"),)
DOUBLE_BACKWARD: tuple[Test, ...] = (("TestBwdGradients", "test_fn_gradgrad"),)
FORWARD: tuple[Test, ...] = (("TestCommon", "test_compare_cpu"), ("TestCommon", "test_numpy_ref"))


@dataclass(frozen=True)
class Decorations:
    """The OpInfo's word on one comparison: not judged (and why), and tolerances it allows beyond the defaults."""

    skip: str | None = None
    atol: float | None = None
    rtol: float | None = None


def _active(info: Any, test: Test, device_type: str, dtype: Any) -> bool:
    """DecorateInfo.is_active across torch versions (2.11 added `param_kwargs`); a bare decorator is always active."""
    is_active = getattr(info, "is_active", None)
    if is_active is None:
        return True
    try:
        return bool(is_active(test[0], test[1], device_type, dtype, {}))
    except TypeError:
        return bool(is_active(test[0], test[1], device_type, dtype))


def _read(decorator: Any, dtype: Any) -> tuple[str | None, float | None, float | None]:
    """(skip reason, atol, rtol) that one decorator sets for `dtype`, by applying it to a stand-in test."""

    def stand_in() -> None:
        return None

    try:
        out = decorator(stand_in)
    except Exception:  # a decorator that needs a TestCase or arguments: not one we can read
        return None, None, None
    if getattr(out, "__unittest_skip__", False):
        return f"skipped: {getattr(out, '__unittest_skip_why__', '') or 'no reason given'}", None, None
    if getattr(out, "__unittest_expecting_failure__", False):
        return "expected to fail (unittest.expectedFailure)", None, None
    tolerance = (getattr(out, "tolerance_overrides", None) or {}).get(dtype)
    if tolerance is not None:
        return None, float(tolerance.atol), float(tolerance.rtol)
    precision = (getattr(out, "precision_overrides", None) or {}).get(dtype)
    if precision is not None:
        return None, float(precision), None
    return None, None, None


def decorations(info: Any, tests: Sequence[Test], device_type: str, dtype: Any) -> Decorations:
    """What the OpInfo's decorators say about the PyTorch `tests` a comparison stands for, on this device and dtype."""
    skip: str | None = None
    atol: float | None = None
    rtol: float | None = None
    for entry in getattr(info, "decorators", ()) or ():
        matched = [t for t in tests if _active(entry, t, device_type, dtype)]
        if not matched:
            continue
        inner = getattr(entry, "decorators", None)
        for decorator in inner if isinstance(inner, list) else [entry]:
            why, a, r = _read(decorator, dtype)
            if why is not None and len(matched) == len(tests) and skip is None:
                names = ", ".join(f"{c}.{n}" for c, n in matched)
                skip = f"PyTorch's OpInfo for {info.name}: {names} is {why} on {device_type}"
            if a is not None:
                atol = a if atol is None else max(atol, a)
            if r is not None:
                rtol = r if rtol is None else max(rtol, r)
    return Decorations(skip, atol, rtol)


def fast_mode(info: Any) -> bool:
    """gradcheck's fast mode as PyTorch's tests use it: the OpInfo's `gradcheck_fast_mode`, else True (the default
    of torch.testing._internal.common_utils.gradcheck outside PYTORCH_TEST_WITH_SLOW_GRADCHECK)."""
    value = getattr(info, "gradcheck_fast_mode", None)
    return True if value is None else bool(value)
