"""losses.reference over its option products: a loss that mishandles a combination is named, a combination torch
refuses is a finding, and the references share no code with torch's losses; the healthy twins (every combination on
this machine's real torch) pass. Faults re-created by monkeypatching the real functional losses."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import pytest
import torch.nn.functional as F

from envcheck.numerics.loss_reference import cases, loss_comparisons
from envcheck.reference.devices import numerics_mode

LOSSES = ("cross_entropy", "nll_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits", "smooth_l1_loss",
          "huber_loss", "mse_loss", "l1_loss", "kl_div", "ctc_loss", "margin_ranking_loss", "hinge_embedding_loss",
          "multi_margin_loss", "multilabel_margin_loss", "soft_margin_loss", "multilabel_soft_margin_loss",
          "cosine_embedding_loss", "triplet_margin_loss", "poisson_nll_loss", "gaussian_nll_loss")  # fmt: skip


@pytest.fixture(autouse=True)
def _as_the_check_runs() -> Iterator[None]:
    with numerics_mode():
        yield


@pytest.mark.parametrize("quick", [True, False], ids=["quick", "full"])
def test_healthy_losses_match_their_formulas_in_every_combination(quick: bool) -> None:
    comps, problems = loss_comparisons("cpu", quick)
    assert not problems
    assert all(c.ok for c in comps), [c.describe() for c in comps if not c.ok]


def test_the_product_is_a_product() -> None:
    labels = [c.label for c in cases(quick=False)]
    assert len(labels) == len(set(labels))
    together = [x for x in labels if "weight=True" in x and "ignore_index=2" in x and "smoothing=0.2" in x]
    assert {x.rsplit(", ", 1)[-1] for x in together if x.startswith("cross_entropy(")} == {
        "none)",
        "sum)",
        "mean)",
    }
    assert len([x for x in labels if x.startswith("ctc_loss(")]) == 3 * 2 * 2 * 2


def test_references_call_no_torch_loss(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every reference still evaluates with torch's functional losses replaced by functions that raise."""

    def refuse(*_: Any, **__: Any) -> Any:
        raise AssertionError("a reference called a torch loss")

    for name in LOSSES:
        monkeypatch.setattr(F, name, refuse)
    for case in cases(quick=False):
        case.ref(case.x.float().double().requires_grad_(True))


def test_all_ignored_mean_returning_zero_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mean over no targets is 0/0: NaN (torch since pytorch#64572); returning 0 hides a batch of padding."""
    original = F.cross_entropy

    @functools.wraps(original)
    def zero_when_all_ignored(x: Any, y: Any, *a: Any, **kw: Any) -> Any:
        out = original(x, y, *a, **kw)
        ignore = kw.get("ignore_index", -100)
        if (
            not y.dtype.is_floating_point
            and bool((y == ignore).all())
            and kw.get("reduction", "mean") == "mean"
        ):
            return out.nan_to_num(0.0)
        return out

    monkeypatch.setattr(F, "cross_entropy", zero_when_all_ignored)
    comps, _ = loss_comparisons("cpu", quick=False)
    bad = [c.op for c in comps if not c.ok]
    assert "cross_entropy((N, C), weight=False, every target ignored, smoothing=0.0, mean)" in bad, bad


def test_a_combination_torch_refuses_is_a_finding(monkeypatch: pytest.MonkeyPatch) -> None:
    original = F.kl_div

    @functools.wraps(original)
    def no_log_target(x: Any, t: Any, *a: Any, log_target: bool = False, **kw: Any) -> Any:
        if log_target:
            raise RuntimeError("log_target is not supported")
        return original(x, t, *a, **kw)

    monkeypatch.setattr(F, "kl_div", no_log_target)
    _, problems = loss_comparisons("cpu", quick=True)
    assert problems == [
        "kl_div(log_target=True, batchmean) on cpu: torch raised RuntimeError: log_target is not supported"
    ]
