"""The shared worst-element comparison names the op, device, dtype and the worst element."""

from __future__ import annotations

import torch

from envcheck.core.result import Status
from envcheck.reference.compare import compare, comparisons_result


def test_worst_element_is_found_and_described() -> None:
    expected = torch.zeros(3, 4)
    actual = expected.clone()
    actual[2, 1] = 0.5
    actual[0, 0] = 1e-7  # inside tolerance
    c = compare(actual, expected, op="myop", device="cpu", dtype="float32", atol=1e-6, rtol=0.0)
    assert not c.ok and c.worst_index == (2, 1) and c.max_abs == 0.5
    text = c.describe()
    assert "myop" in text and "cpu" in text and "float32" in text and "[2, 1]" in text


def test_nan_and_shape_mismatch_fail() -> None:
    nan = compare(torch.tensor([1.0, float("nan")]), torch.tensor([1.0, 2.0]), op="o", device="cpu",
                  dtype="float32", atol=1.0, rtol=1.0)
    assert not nan.ok and nan.worst_index == (1,)
    shape = compare(torch.zeros(2), torch.zeros(3), op="o", device="cpu", dtype="float32", atol=1, rtol=1)
    assert not shape.ok


def test_result_reports_errors_and_tolerances() -> None:
    good = compare(torch.ones(2), torch.ones(2), op="o", device="cpu", dtype="float64", atol=0, rtol=0)
    bad = compare(torch.ones(2) * 2, torch.ones(2), op="bad", device="cpu", dtype="float64", atol=0, rtol=0)
    ok = comparisons_result("x", [good], tolerances={"atol": 0}, remediation="r")
    assert ok.status is Status.PASS and ok.measured["o@cpu/float64"]["max_abs"] == 0.0
    fail = comparisons_result("x", [good, bad], tolerances={"atol": 0}, remediation="r")
    assert fail.status is Status.FAIL and "bad on cpu float64" in fail.summary and fail.expected == {"atol": 0}


def test_unravel_matches_torch() -> None:
    from envcheck.reference.compare import unravel

    for flat in (0, 5, 23):
        assert unravel(flat, (2, 3, 4)) == tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), (2, 3, 4)))
    assert unravel(0, ()) == ()
