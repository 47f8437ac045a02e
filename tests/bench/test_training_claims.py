"""The training-claim units detect what they claim to: an injected slow clip fails the 0.3% claim."""

from __future__ import annotations

import time
from typing import Any

from envcheck.bench.training_claims import clip_figures


def _by_key(figs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f["key"]: f for f in figs}


def test_injected_slow_clip_is_reported_as_overhead() -> None:
    """A clip that sleeps 50 ms is far above 0.3% of a ~tens-of-ms step: the claim must fail."""
    import torch

    torch.set_num_threads(1)

    def slow_clip(params: Any, max_norm: float) -> Any:
        time.sleep(0.05)
        return torch.nn.utils.clip_grad_norm_(params, max_norm)

    figs = _by_key(clip_figures("cpu", True, clip_fn=slow_clip))
    assert figs["clip.alone_ms"]["value"] >= 50.0
    assert figs["clip.overhead_pct"]["claim"]["holds"] is False
