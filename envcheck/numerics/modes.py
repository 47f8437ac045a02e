"""modules.train_eval: modules whose state or output differs between train() and eval(), against closed forms in
float64, over their documented options.

Normalization (norm_options.py): BatchNorm1d/2d/3d and InstanceNorm1d/2d/3d x track_running_stats x momentum (0.1,
0.5, None: the cumulative average) x affine x the documented input shapes (batched; BatchNorm1d's (N, C); InstanceNorm
unbatched): outputs, running statistics (or none), num_batches_tracked, eval with running or batch statistics, eval
moving no buffer. Dropout (dropout_options.py): Dropout, Dropout1d/2d/3d, AlphaDropout, FeatureAlphaDropout on their
documented batched and unbatched shapes: kept elements scaled exactly, whole channels, the gradient's mask, the dropped
fraction, eval the identity. The quick level runs a slice of both (BatchNorm1d/2d and InstanceNorm1d with and without
running statistics, momentum 0.1 and None, both shapes; one shape per dropout module, unbatched Dropout1d and
Dropout3d among them); the full level adds the ModuleInfo sweep (module_sweep.py).
"""

from __future__ import annotations

from typing import Any

from envcheck.core.check import Context, Level
from envcheck.core.result import Result
from envcheck.numerics.dropout_options import dropout_comparisons, not_judged
from envcheck.numerics.norm_options import norm_comparisons
from envcheck.reference.compare import Comparison, comparisons_result
from envcheck.reference.devices import check_devices, numerics_mode


def modules_train_eval(ctx: Context) -> Result:
    """Normalization and dropout modules follow their documented train and eval behaviour under every documented
    option; full level sweeps torch's ModuleInfos whose train and eval differ, float32 vs float64, on every device."""
    import warnings

    from envcheck.numerics.module_sweep import module_sweep

    quick = ctx.level is Level.QUICK
    comparisons: list[Comparison] = []
    problems: list[str] = []
    extra: dict[str, Any] = {"not_judged": not_judged()}
    with numerics_mode(), warnings.catch_warnings():
        warnings.simplefilter(
            "ignore"
        )  # Dropout2d on its documented (N, C, L) input warns that it is 1-D dropout
        for device in check_devices():
            for found, bad in (norm_comparisons(device, quick), dropout_comparisons(device, quick)):
                comparisons += found
                problems += bad
            if not quick:
                found, bad, info = module_sweep(device)
                comparisons += found
                problems += bad
                extra.update(info)
    tolerances = {
        "normalization": "(n+8)·u·(1+|ref|), n = reduced count",
        "dropout": "kept = x/(1-p) exactly (1e-5), dropped fraction within 6 binomial sd",
        "module_db": "(K+8)·u·(1+|ref|)",
    }
    return comparisons_result(
        "train/eval modules vs closed forms",
        comparisons,
        tolerances=tolerances,
        extra=extra,
        problems=problems,
        remediation="a module computes the wrong thing for its mode or option; check model.train() / "
        "model.eval() calls and track_running_stats, then reinstall torch",
    )
