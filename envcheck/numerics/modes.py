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

Options set on the live module, not only at construction: live_norms.py steps BatchNorm and InstanceNorm through
sequences in which track_running_stats is turned off (frozen statistics) and on, momentum changes (to None too), train()
and eval() alternate, eps changes, reset_running_stats() and a partial load_state_dict(strict=False) happen, against a
float64 layer that reads its options at every forward as torch documents them (quick: BatchNorm2d, three of the
sequences); live_twins.py (full) holds Dropout*, RNN/GRU/LSTM, MultiheadAttention, Embedding, LayerNorm and GroupNorm
options set by attribute to a twin built with the value.
"""

from __future__ import annotations

from typing import Any

from envcheck.core.check import Context, Level
from envcheck.core.result import Result
from envcheck.numerics.dropout_options import dropout_comparisons, not_judged
from envcheck.numerics.live_norms import live_norm_comparisons
from envcheck.numerics.norm_options import norm_comparisons
from envcheck.reference.compare import Comparison, comparisons_result
from envcheck.reference.devices import check_devices, numerics_mode


def modules_train_eval(ctx: Context) -> Result:
    """Normalization and dropout modules follow their documented train and eval behaviour under every documented
    option; full level sweeps torch's ModuleInfos whose train and eval differ, float32 vs float64, on every device."""
    import warnings

    from envcheck.numerics.live_twins import twin_comparisons
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
            found, live_not_judged, bad = live_norm_comparisons(device, quick)
            comparisons += found
            problems += bad
            if live_not_judged:
                extra["not_judged"]["live InstanceNorm buffers"] = (
                    "InstanceNorm with track_running_stats turned off on a live module keeps updating its running "
                    f"statistics in train() and eval(), where its documentation says it tracks none ({len(live_not_judged)} "
                    "sequences; no upstream report found)"
                )
            if not quick:
                found, bad = twin_comparisons(device)
                comparisons += found
                problems += bad
                found, bad, info = module_sweep(device)
                comparisons += found
                problems += bad
                extra.update(info)
    tolerances = {
        "normalization": "(n+8)·u·(1+|ref|), n = reduced count",
        "dropout": "kept = x/(1-p) exactly (1e-5), dropped fraction within 6 binomial sd",
        "module_db": "(K+8)·u·(1+|ref|)",
        "live options": "outputs (n+8)·u·(1+|ref|), buffers after k forwards (n+8)·k·u·(1+|ref|), "
        "num_batches_tracked exactly; a live-set attribute equals a twin built with it bitwise",
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
