"""The shared worst-element comparison names the op, device, dtype and the worst element."""

from __future__ import annotations

import pytest
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
    nan = compare(
        torch.tensor([1.0, float("nan")]),
        torch.tensor([1.0, 2.0]),
        op="o",
        device="cpu",
        dtype="float32",
        atol=1.0,
        rtol=1.0,
    )
    assert not nan.ok and nan.worst_index == (1,)
    shape = compare(torch.zeros(2), torch.zeros(3), op="o", device="cpu", dtype="float32", atol=1, rtol=1)
    assert not shape.ok


def test_result_reports_errors_and_tolerances() -> None:
    good = compare(torch.ones(2), torch.ones(2), op="o", device="cpu", dtype="float64", atol=0, rtol=0)
    bad = compare(torch.ones(2) * 2, torch.ones(2), op="bad", device="cpu", dtype="float64", atol=0, rtol=0)
    ok = comparisons_result("x", [good], tolerances={"atol": 0}, remediation="r")
    assert ok.status is Status.PASS and ok.measured["o@cpu/float64"]["max_abs"] == 0.0
    fail = comparisons_result("x", [good, bad], tolerances={"atol": 0}, remediation="r")
    assert (
        fail.status is Status.FAIL and "bad on cpu float64" in fail.summary and fail.expected == {"atol": 0}
    )


def test_unravel_matches_torch() -> None:
    from envcheck.reference.compare import unravel

    for flat in (0, 5, 23):
        assert unravel(flat, (2, 3, 4)) == tuple(
            int(i) for i in torch.unravel_index(torch.tensor(flat), (2, 3, 4))
        )
    assert unravel(0, ()) == ()


def test_every_comparison_records_its_margin() -> None:
    """The margin is the worst element's error over its own tolerance (the GPU proof's summary lists the
    ones above 0.3); a zero tolerance gives inf for any error, and exact agreement 0."""
    from envcheck.reference.compare import margin, scalar_measured

    c = compare(
        torch.tensor([1.0, 2.0]),
        torch.tensor([1.0, 2.1]),
        op="o",
        device="cpu",
        dtype="float32",
        atol=0.05,
        rtol=0.5,
    )  # allowed: 0.05 + 0.5*2.1 = 1.1 for an error of 0.1
    assert (
        c.ok
        and c.margin == pytest.approx(0.1 / 1.1)
        and c.measured()["margin"] == pytest.approx(0.1 / 1.1, abs=1e-6)
    )
    edge = compare(
        torch.tensor([1.5]), torch.tensor([1.0]), op="o", device="cpu", dtype="float32", atol=0.25, rtol=0
    )
    assert not edge.ok and edge.margin == pytest.approx(2.0)
    exact = compare(torch.ones(3), torch.ones(3), op="o", device="cpu", dtype="float64", atol=0, rtol=0)
    assert exact.ok and exact.margin == 0.0
    assert compare(
        torch.zeros(2), torch.zeros(3), op="o", device="cpu", dtype="float32", atol=1, rtol=1
    ).margin == float("inf")
    assert margin(1e-3, 0.0) == float("inf") and margin(float("nan"), 1.0) == float("inf")
    assert scalar_measured(0.5, 2.0) == {"error": 0.5, "tolerance": 2.0, "margin": 0.25}
