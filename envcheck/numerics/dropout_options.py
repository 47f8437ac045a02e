"""The dropout half of modules.train_eval: Dropout, Dropout1d/2d/3d, AlphaDropout and FeatureAlphaDropout on every
input shape their documentation gives, batched and unbatched, against closed forms.

In train(), every kept element is exactly x/(1-p) (alpha variants: a·x + b, and a dropped one a·α' + b, with α' = -λα
and a, b from Klambauer et al. 2017), whole channels drop together for the feature variants (the channel is the
second dimension of a batched input and the first of an unbatched one: Dropout1d's (C, L), Dropout3d's (C, D, H, W);
Dropout2d documents (N, C, H, W) and (N, C, L), so its 3-D input is a batch), the gradient is the same mask and scale,
and the dropped fraction lies within 6 binomial standard deviations of p; in eval() the output is the input.
FeatureAlphaDropout also documents an unbatched (C, D, H, W), which torch does not implement (it takes any input's
second dimension as the channel; its maintainers call that documentation wrong, pytorch#69960): not judged, named.
"""

from __future__ import annotations

import itertools
from typing import Any

from envcheck.reference.compare import Comparison, compare
from envcheck.reference.norm_stats import alpha_dropout_affine

# (module, input shape, channel dimension: None for elementwise dropout)
SHAPES: tuple[tuple[str, tuple[int, ...], int | None], ...] = (
    ("Dropout", (8, 3, 5, 5), None),
    ("Dropout", (40,), None),
    ("Dropout1d", (8, 6, 9), 1),
    ("Dropout1d", (24, 9), 0),
    ("Dropout2d", (8, 6, 3, 3), 1),
    ("Dropout2d", (8, 6, 9), 1),
    ("Dropout3d", (8, 6, 2, 2, 2), 1),
    ("Dropout3d", (24, 2, 2, 2), 0),
    ("AlphaDropout", (8, 3, 5, 5), None),
    ("AlphaDropout", (40,), None),
    ("FeatureAlphaDropout", (8, 6, 3, 3), 1),
)
QUICK_SHAPES = {("Dropout", 4), ("Dropout1d", 2), ("Dropout2d", 4), ("Dropout3d", 4), ("AlphaDropout", 4),
                ("FeatureAlphaDropout", 4)}  # fmt: skip
NOT_JUDGED = {
    "FeatureAlphaDropout unbatched (C, D, H, W)": "documented, not implemented: the second dimension is taken as "
    "the channel whatever the input (https://github.com/pytorch/pytorch/issues/69960)"
}


def _label(name: str, shape: tuple[int, ...], channel: int | None, p: float) -> str:
    form = "unbatched" if channel == 0 else "batched"
    return f"{name}(p={p}) {form} {'x'.join(map(str, shape))} input"


def case_comparisons(
    name: str, shape: tuple[int, ...], channel: int | None, p: float, device: str
) -> tuple[list[Comparison], list[str]]:
    """One module, shape and p: train forward and backward, the dropped fraction, eval."""
    import torch

    label = _label(name, shape, channel, p)
    x = (
        (torch.randn(*shape, generator=torch.Generator().manual_seed(3)) + 3.0)
        .to(device)
        .requires_grad_(True)
    )
    mod = getattr(torch.nn, name)(p).to(device)
    alpha = "Alpha" in name
    y = mod.train()(x)
    gy = torch.randn(shape, generator=torch.Generator().manual_seed(4)).to(device)
    (y * gy).sum().backward()  # not y.backward(gy): that imports sympy (~1-3 s cold)
    x64, y64, g64, gy64 = (t.detach().double().cpu() for t in (x, y, x.grad, gy))
    a, b, alpha_p = alpha_dropout_affine(p) if alpha else (1 / (1 - p), 0.0, 0.0)
    kept = (y64 - (a * x64 + b)).abs() <= 1e-5 * (1 + (a * x64).abs())
    problems: list[str] = []
    units = x64.numel()
    if channel is not None:  # a channel is kept or dropped as a whole: reduce the mask over the dims after it
        chan = kept.reshape(*shape[: channel + 1], -1)
        whole = chan.all(-1) | (~chan).all(-1)
        if not bool(whole.all()):
            problems.append(
                f"{label} on {device}: a channel was partly dropped (feature dropout drops whole channels)"
            )
        kept = chan.all(-1, keepdim=True).expand_as(chan).reshape(shape)
        units = int(torch.tensor(shape[: channel + 1]).prod())
    dropped_value = torch.full_like(x64, a * alpha_p + b if alpha else 0.0)
    expect = torch.where(kept, a * x64 + b, dropped_value)
    comps = [
        compare(
            y64,
            expect,
            op=f"{label} train output (kept scaled, dropped {'a·α′+b' if alpha else '0'})",
            device=device,
            dtype="float32",
            atol=1e-5,
            rtol=2e-6,
        ),
        compare(
            g64,
            torch.where(kept, a * gy64, torch.zeros_like(gy64)),
            op=f"{label} gradient (same mask and scale)",
            device=device,
            dtype="float32",
            atol=1e-6,
            rtol=2e-6,
        ),
    ]
    frac = 1 - float(kept.double().mean())
    if abs(frac - p) > 6 * (p * (1 - p) / units) ** 0.5 + 1e-9:
        problems.append(
            f"{label} on {device}: dropped {frac:.3f} of {'channels' if channel is not None else 'elements'}, "
            f"p={p} (beyond 6 binomial standard deviations)"
        )
    comps.append(
        compare(
            mod.eval()(x.detach()),
            x64,
            op=f"{label} eval is the identity",
            device=device,
            dtype="float32",
            atol=0.0,
            rtol=0.0,
        )
    )
    return comps, problems


def dropout_comparisons(device: str, quick: bool) -> tuple[list[Comparison], list[str]]:
    """Every dropout module x documented shape x p, train and eval, forward and backward; quick: one shape each (the
    unbatched Dropout1d's among them), p = 0.3."""
    comps: list[Comparison] = []
    problems: list[str] = []
    shapes = [s for s in SHAPES if not quick or (s[0], len(s[1])) in QUICK_SHAPES]
    for (name, shape, channel), p in itertools.product(shapes, (0.3,) if quick else (0.0, 0.3, 0.7)):
        found, bad = case_comparisons(name, shape, channel, p, device)
        comps += found
        problems += bad
    return comps, problems


def not_judged() -> dict[str, Any]:
    """The documented shapes torch does not implement, with the upstream report."""
    return dict(NOT_JUDGED)
