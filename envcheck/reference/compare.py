"""Shared "worst element" comparison: which op, device, dtype, index and error, against what tolerance."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from envcheck.core.result import Result, failed, first_of, passed

Tensor = Any  # torch is imported lazily; mypy skips it


@dataclass(frozen=True)
class Comparison:
    """One tensor compared with its reference, reduced to its worst element."""

    op: str
    device: str
    dtype: str
    max_abs: float
    max_rel: float
    worst_index: tuple[int, ...]
    actual: float
    expected: float
    atol: float
    rtol: float
    ok: bool
    margin: float = (
        0.0  # the worst element's error over its tolerance (atol + rtol·|expected|): above 1 fails
    )

    @property
    def label(self) -> str:
        """`op@device/dtype`, the key used in `measured`."""
        return f"{self.op}@{self.device}/{self.dtype}"

    def describe(self) -> str:
        """One line naming the op, device, dtype and worst element."""
        return (
            f"{self.op} on {self.device} {self.dtype}: worst element {list(self.worst_index)} "
            f"got {self.actual:.6g} expected {self.expected:.6g} "
            f"(abs err {self.max_abs:.3g}, rel err {self.max_rel:.3g}; tolerance atol {self.atol:g} + rtol {self.rtol:g})"
        )

    def measured(self) -> dict[str, Any]:
        """The errors and the margin (error over tolerance, the one key every numerics comparison records), JSON-ready."""
        return {
            "max_abs": self.max_abs,
            "max_rel": self.max_rel,
            "worst_index": list(self.worst_index),
            "margin": round(self.margin, 6),
        }


def margin(error: float, tolerance: float) -> float:
    """Error over tolerance: 0 is exact, 1 the edge, above 1 fails; inf for any error against a zero tolerance."""
    if error != error:  # NaN
        return float("inf")
    if tolerance <= 0:
        return 0.0 if error == 0 else float("inf")
    return abs(error) / tolerance


def scalar_measured(error: float, tolerance: float) -> dict[str, Any]:
    """`measured` of a scalar comparison (a loss, a directional derivative, a max relative error), with the same
    `margin` key as Comparison.measured(), so reports and the GPU proof read every numerics margin one way."""
    return {"error": error, "tolerance": tolerance, "margin": round(margin(error, tolerance), 6)}


def unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """Flat index -> per-dimension index (torch.unravel_index would import sympy: ~1 s cold)."""
    index = []
    for size in reversed(shape):
        flat, rest = divmod(flat, size) if size else (0, 0)
        index.append(rest)
    return tuple(reversed(index))


def compare(
    actual: Tensor, expected: Tensor, *, op: str, device: str, dtype: str, atol: float, rtol: float
) -> Comparison:
    """Compare every element (in float64 on CPU); the worst is the one furthest beyond tolerance."""
    import torch

    a = actual.detach().to("cpu", torch.float64)
    e = expected.detach().to("cpu", torch.float64)
    if a.shape != e.shape:
        return Comparison(
            op,
            device,
            dtype,
            float("inf"),
            float("inf"),
            (),
            float("nan"),
            float("nan"),
            atol,
            rtol,
            False,
            float("inf"),
        )
    diff = (a - e).abs()
    diff = torch.where(torch.isfinite(a) == torch.isfinite(e), diff, torch.full_like(diff, float("inf")))
    diff = torch.nan_to_num(diff, nan=float("inf"))
    rel = diff / e.abs().clamp_min(1e-300)
    allowed = atol + rtol * e.abs()
    excess = diff - allowed
    ratio = torch.where(
        allowed > 0,
        diff / allowed.clamp_min(1e-300),
        torch.where(diff > 0, torch.full_like(diff, float("inf")), torch.zeros_like(diff)),
    )
    flat = int(torch.argmax(excess).item()) if excess.numel() else 0
    index = unravel(flat, tuple(e.shape))
    ok = bool((excess <= 0).all().item())
    return Comparison(
        op=op,
        device=device,
        dtype=dtype,
        max_abs=float(diff.max().item()) if diff.numel() else 0.0,
        max_rel=float(rel.max().item()) if rel.numel() else 0.0,
        worst_index=index,
        actual=float(a.reshape(-1)[flat].item()) if a.numel() else 0.0,
        expected=float(e.reshape(-1)[flat].item()) if e.numel() else 0.0,
        atol=atol,
        rtol=rtol,
        ok=ok,
        margin=float(ratio.max().item()) if ratio.numel() else 0.0,
    )


Check = tuple[str, Any, Any, float, float]  # (op, actual or None, expected, atol, rtol)


def _ratios(checks: Sequence[Check]) -> list[float]:
    """Each check's worst error over its tolerance, in one pass over all of them (inf for a missing or misshapen
    actual); equal values, non-finite ones included, are no error."""
    import torch

    out = [float("inf")] * len(checks)
    live = [i for i, (_, got, want, _, _) in enumerate(checks)
            if got is not None and tuple(got.shape) == tuple(want.shape) and want.numel()]  # fmt: skip
    for i, (_, got, want, _, _) in enumerate(checks):
        if got is not None and tuple(got.shape) == tuple(want.shape) and not want.numel():
            out[i] = 0.0
    if not live:
        return out
    a = torch.cat([checks[i][1].detach().to("cpu", torch.float64).reshape(-1) for i in live])
    e = torch.cat([checks[i][2].detach().to("cpu", torch.float64).reshape(-1) for i in live])
    sizes = [checks[i][2].numel() for i in live]
    segment = torch.repeat_interleave(torch.arange(len(live)), torch.tensor(sizes))
    atol = torch.tensor([checks[i][3] for i in live], dtype=torch.float64)[segment]
    rtol = torch.tensor([checks[i][4] for i in live], dtype=torch.float64)[segment]
    diff = torch.nan_to_num((a - e).abs(), nan=float("inf"))
    diff = torch.where((a == e) | (a.isnan() & e.isnan()), torch.zeros_like(diff), diff)
    ratio = diff / (atol + rtol * e.abs().nan_to_num(nan=0.0, posinf=0.0)).clamp_min(1e-300)
    worst = torch.zeros(len(live), dtype=torch.float64).scatter_reduce(0, segment, ratio, "amax")
    for i, r in zip(live, worst.tolist(), strict=True):
        out[i] = r
    return out


def judged(checks: Sequence[Check], *, device: str, dtype: str) -> list[Comparison]:
    """compare() for every check beyond its tolerance and for the one closest to it, the rest judged by one cheap
    reduction each (compare() costs about a millisecond; an option product has hundreds of checks). An actual of None
    (a value that should exist and does not) fails; non-finite expected values must be matched exactly."""
    import torch

    ratios = _ratios(checks)
    keep = {i for i, r in enumerate(ratios) if r > 1}
    if checks:
        keep.add(max(range(len(checks)), key=ratios.__getitem__))
    out = []
    for i in sorted(keep):
        op, got, want, atol, rtol = checks[i]
        got = torch.full_like(want, float("nan")) if got is None else got
        finite = torch.isfinite(want.detach().cpu())
        if ratios[i] <= 1 and not bool(
            finite.all()
        ):  # within tolerance: matching non-finite values are no error
            got, want = got.detach().cpu()[finite], want.detach().cpu()[finite]
        out.append(compare(got, want, op=op, device=device, dtype=dtype, atol=atol, rtol=rtol))
    return out


def comparisons_result(
    what: str,
    comparisons: Sequence[Comparison],
    *,
    tolerances: dict[str, Any],
    remediation: str,
    extra: dict[str, Any] | None = None,
    problems: Iterable[str] = (),
) -> Result:
    """PASS when every comparison is within tolerance and there are no other problems; else FAIL naming the worst."""
    measured: dict[str, Any] = {c.label: c.measured() for c in comparisons}
    measured.update(extra or {})
    bad = [c.describe() for c in comparisons if not c.ok] + list(problems)
    if bad:
        from envcheck.reference.suspects import wrong_math_fix

        fix, fault, causes = wrong_math_fix(remediation)
        if causes:
            measured["suspects"] = causes
        return failed(
            f"{what}: {first_of(bad)}",
            fix,
            measured=measured,
            expected=tolerances,
            details="\n".join(bad),
            fault_class=fault,
        )
    worst = max(comparisons, key=lambda c: c.max_abs, default=None)
    tail = f"; largest abs err {worst.max_abs:.3g} ({worst.label})" if worst else ""
    return passed(
        f"{what}: {len(comparisons)} comparisons within tolerance{tail}",
        measured=measured,
        expected=tolerances,
    )
