"""dropout.structure: which elements share one random draw, for every dropout-style op on every documented input shape.

A dropout is right only if the right elements share one draw and the draws are independent; a check that looks at
each element alone (zero or scaled, the dropped fraction) passes a mask drawn over the wrong dimensions. Here each
op's kept-mask is read in two calls and judged against the structure its documentation gives (envcheck.reference.
draw_stats: exact sharing inside a unit, binomial independence between units along every axis and between calls,
the dropped count; false-failure rate at most ALPHA per statistic, the count in `measured`):

- elementwise: nn.Dropout, nn.AlphaDropout, F.dropout, F.alpha_dropout (and in place) on 1-D, 2-D and 4-D inputs;
- one draw per channel per sample: Dropout1d (N, C, L) and unbatched (C, L); Dropout2d (N, C, H, W) and (N, C, L)
  (the 3-D form torch documents and warns about); Dropout3d (N, C, D, H, W) and unbatched (C, D, H, W);
  FeatureAlphaDropout (N, C, D, H, W); the functional forms and their in-place variants;
- the deprecated ranks torch warns about, judged by the structure its code applies (Dropout2d on 2-D and 5-D input:
  channel = dim 1; Dropout3d on 2-D and 3-D input: unbatched, channel = dim 0; the warning's "use dropout instead"
  describes neither, so the check holds torch to what it does);
- scaled_dot_product_attention's dropout_p on every backend of the device, nn.MultiheadAttention's attention dropout,
  and RNN/GRU/LSTM inter-layer dropout (batched, batch_first, bidirectional, unbatched): elementwise
  (envcheck.numerics.draw_sources reads their masks).

Quick level: the modules' documented batched shapes, Dropout2d's (N, C, L), unbatched Dropout1d, the math SDPA
backend and an LSTM, p = 0.3. Full level: everything, p = 0.3 and 0.7.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from envcheck.core.check import Context, Level
from envcheck.core.result import Result, passed
from envcheck.numerics import draw_sources as src
from envcheck.reference.compare import comparisons_result
from envcheck.reference.devices import check_devices, numerics_mode
from envcheck.reference.draw_stats import ALPHA, Statistic, between_calls, independence, unit_mask
from envcheck.reference.norm_stats import alpha_dropout_affine

Tensor = Any


@dataclass(frozen=True)
class DrawCase:
    """One op on one input shape, and which of its dimensions index one draw."""

    op: str  # "nn.Dropout2d", "F.dropout2d", "F.dropout2d(inplace)", "sdpa[MATH]", "MultiheadAttention", "LSTM"
    form: str
    shape: tuple[int, ...]  # the input's shape (attention: the batch dims; recurrent: (T, N) or (T,))
    draw_dims: tuple[int, ...]  # dimensions of the kept-mask that index a draw
    names: str  # one letter per kept-mask dimension
    quick: bool = False

    @property
    def label(self) -> str:
        """`nn.Dropout2d (N, C, L)`."""
        return f"{self.op} {self.form}"


def _module_cases() -> list[DrawCase]:
    c = DrawCase
    cases = []
    for name in ("Dropout", "AlphaDropout"):
        cases += [
            c(f"nn.{name}", "1-D", (4096,), (0,), "L"),
            c(f"nn.{name}", "2-D", (64, 64), (0, 1), "NC"),
            c(f"nn.{name}", "(N, C, H, W)", (8, 8, 8, 8), (0, 1, 2, 3), "NCHW", quick=True),
        ]
    cases += [
        c("nn.Dropout1d", "(N, C, L)", (64, 16, 8), (0, 1), "NCL", quick=True),
        c("nn.Dropout1d", "unbatched (C, L)", (256, 8), (0,), "CL", quick=True),
        c("nn.Dropout2d", "(N, C, H, W)", (32, 16, 3, 3), (0, 1), "NCHW", quick=True),
        c("nn.Dropout2d", "(N, C, L)", (32, 16, 5), (0, 1), "NCL", quick=True),
        c("nn.Dropout2d", "deprecated 2-D", (64, 64), (0, 1), "NC"),
        c("nn.Dropout2d", "deprecated 5-D", (16, 16, 2, 2, 2), (0, 1), "NCDHW"),
        c("nn.Dropout3d", "(N, C, D, H, W)", (16, 16, 2, 2, 2), (0, 1), "NCDHW", quick=True),
        c("nn.Dropout3d", "unbatched (C, D, H, W)", (256, 2, 2, 2), (0,), "CDHW"),
        c("nn.Dropout3d", "deprecated 3-D", (256, 4, 4), (0,), "CHW"),
        c("nn.Dropout3d", "deprecated 2-D", (256, 8), (0,), "CL"),
        c("nn.FeatureAlphaDropout", "(N, C, D, H, W)", (16, 16, 2, 2, 2), (0, 1), "NCDHW", quick=True),
    ]
    functional = {"dropout": "Dropout", "alpha_dropout": "AlphaDropout", "dropout1d": "Dropout1d",
                  "dropout2d": "Dropout2d", "dropout3d": "Dropout3d", "feature_alpha_dropout": "FeatureAlphaDropout"}  # fmt: skip
    for fn, module in functional.items():
        first = next(x for x in cases if x.op == f"nn.{module}" and x.quick)
        for op in (f"F.{fn}", f"F.{fn}(inplace)"):
            cases.append(c(op, first.form, first.shape, first.draw_dims, first.names))
    return cases


def _attention_cases() -> list[DrawCase]:
    c = DrawCase
    cases = []
    for backend, _ in src.SDPA_BACKENDS:
        cases.append(c(f"sdpa[{backend}]", "(B, H, L, S)", (4, 4), (0, 1, 2, 3), "BHLS", backend == "MATH"))
        cases.append(c(f"sdpa[{backend}]", "(B, L, S)", (8,), (0, 1, 2), "BLS"))
    cases.append(c("MultiheadAttention", "batched weights (N, heads, L, S)", (4,), (0, 1, 2, 3), "NHLS"))
    cases.append(c("MultiheadAttention", "unbatched weights (heads, L, S)", (), (0, 1, 2), "HLS"))
    forms = {"(T, N, H)": (8, 16), "batch_first (N, T, H)": (16, 8), "bidirectional (T, N, 2H)": (8, 16),
             "unbatched (T, H)": (8,)}  # fmt: skip
    for kind, (form, shape) in itertools.product(src.GATES, forms.items()):
        names = "THD"[: len(shape) + 1] if len(shape) == 1 else ("NTH" if "batch_first" in form else "TNH")
        quick = kind == "LSTM" and form == "(T, N, H)"
        cases.append(c(kind, form, shape, tuple(range(len(shape) + 1)), names, quick))
    return cases


def cases(quick: bool) -> list[DrawCase]:
    """Every op and documented shape; quick: the slice named in the module docstring."""
    every = _module_cases() + _attention_cases()
    return [x for x in every if x.quick or not quick]


def caller(case: DrawCase, p: float, device: str) -> Callable[[], Tensor | None]:
    """A function that runs one call of the case's op and returns its kept-mask (None: not available here)."""
    import torch
    import torch.nn.functional as F

    if case.op.startswith("sdpa["):
        backend = case.op[5:-1]
        dtype = dict(src.SDPA_BACKENDS)[backend]
        return lambda: src.sdpa_kept(case.shape, p, device, backend, dtype)
    if case.op == "MultiheadAttention":
        return lambda: src.mha_kept(bool(case.shape), p, device)
    if case.op in src.GATES:
        rnn = src.recurrent(
            case.op,
            p,
            device,
            bidirectional="bidirectional" in case.form,
            batch_first="batch_first" in case.form,
        )
        return lambda: src.rnn_kept(rnn, case.shape, device)
    x = (1 + torch.rand(case.shape, generator=torch.Generator().manual_seed(7))).to(device)
    alpha = "lpha" in case.op
    a, b, _ = alpha_dropout_affine(p) if alpha else (1.0, 0.0, 0.0)
    if case.op.startswith("nn."):
        module = getattr(torch.nn, case.op[3:])(p).to(device).train()

        def call() -> Tensor:
            return module(x)

    else:
        fn = getattr(F, case.op[2:].split("(")[0])
        inplace = case.op.endswith("(inplace)")

        def call() -> Tensor:
            return fn(x.clone(), p, True, True) if inplace else fn(x, p, True)

    def kept() -> Tensor:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the ambiguous and deprecated ranks warn by design
            y = call()
        return (y - (a * x + b)).abs() <= 1e-3 * (1 + (a * x + b).abs()) if alpha else y != 0

    return kept


def case_findings(case: DrawCase, p: float, device: str) -> tuple[list[Statistic], list[str], bool]:
    """(statistics, exact problems, ran) for two calls of one case."""
    call = caller(case, p, device)
    first, second = call(), call()
    if first is None or second is None:
        return [], [], False
    label = f"{case.label} p={p} on {device}"
    problems, units = [], []
    for mask in (first, second):
        wrong, u = unit_mask(mask.cpu(), case.draw_dims)
        if wrong is not None:
            problems.append(
                f"{label}: element {wrong.tolist()} differs from its unit's draw (documented: one draw per "
                f"{''.join(case.names[d] for d in case.draw_dims)} index)"
            )
        units.append(u)
    names = [case.names[d] for d in case.draw_dims]
    stats = independence(units[0], p, label, names) + [between_calls(units[0], units[1], p, label)]
    return stats, problems, True


def dropout_structure(ctx: Context) -> Result:
    """Every dropout-style op draws one mask value per documented unit, independently, on every device."""
    quick = ctx.level is Level.QUICK
    stats: list[Statistic] = []
    problems: list[str] = []
    skipped: list[str] = []
    with numerics_mode():
        for device in check_devices():
            for case, p in itertools.product(cases(quick), (0.3,) if quick else (0.3, 0.7)):
                found, bad, ran = case_findings(case, p, device)
                stats += found
                problems += bad
                if not ran:
                    skipped.append(f"{case.label} on {device}")
    problems += [s.describe() for s in stats if not s.ok]
    measured: dict[str, Any] = {
        "statistics": len(stats),
        "alpha_per_statistic": ALPHA,
        "false_failure_bound": len(stats) * ALPHA,
        "closest": min(stats, key=lambda s: math.log(2 / ALPHA) - s.score).describe() if stats else None,
        "not_available": sorted(set(skipped)),
    }
    expected = {
        "rule": "K·D(observed||expected) <= ln(2/alpha) for every statistic (Chernoff-Hoeffding, two-sided)",
        "alpha_per_statistic": ALPHA,
    }
    if problems:
        return comparisons_result(
            "dropout draw structure",
            [],
            tolerances=expected,
            extra=measured,
            problems=problems,
            remediation="a dropout draws its mask over the wrong elements or repeats it; reinstall torch or avoid "
            "the op on this input shape",
        )
    return passed(
        f"dropout draw structure: {len(stats)} binomial statistics within their bounds "
        f"(false-failure rate <= {len(stats) * ALPHA:.1g})",
        measured=measured,
        expected=expected,
    )
