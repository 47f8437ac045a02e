"""The training-claim units detect what they claim to, and their verdicts are honest.

The verdict tests use the speed-ups and clip figures of a real quick bench on an H100
(tests/perf/data/h100_bench_quick.json); no GPU is needed to judge recorded figures.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from envcheck.perf.figures import claim
from envcheck.perf.report import render_notes, render_table
from envcheck.perf.training_claims import AMP_CLAIM, CLIP_CLAIM, clip_figures
from tests.perf.h100 import h100_figure, h100_run


def _by_key(figs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f["key"]: f for f in figs}


def test_injected_slow_clip_is_reported_as_overhead() -> None:
    """A clip that sleeps 50 ms shows up in the figures; the claim (ResNet-50 on A100) is not judged on it."""
    import torch

    torch.set_num_threads(1)

    def slow_clip(params: Any, max_norm: float) -> Any:
        time.sleep(0.05)
        return torch.nn.utils.clip_grad_norm_(params, max_norm)

    figs = _by_key(clip_figures("cpu", True, clip_fn=slow_clip))
    assert figs["clip.alone_ms"]["value"] >= 50.0
    step_ms = figs["clip.step_ms"]["value"]
    assert figs["clip.overhead_pct"]["value"] == pytest.approx(
        100 * figs["clip.alone_ms"]["value"] / step_ms, rel=0.01
    )
    verdict = figs["clip.overhead_pct"]["claim"]
    assert verdict["verdict"] == "not comparable" and verdict["holds"] is None
    assert (
        "ResNet-50" in verdict["why"]
        and "-layer transformer" in verdict["why"]
        and " ms on the CPU" in verdict["why"]
    )


@pytest.mark.parametrize(
    ("speedup", "verdict", "holds"),
    [
        (2.8328, "holds", True),  # measured on the H100, bf16
        (2.7593, "holds", True),  # measured on the H100, fp16 + GradScaler
        (6.5, "exceeds", True),  # a larger model on an H100: faster than claimed, not a fault
        (1.2, "fails", False),  # slower than claimed
    ],
)
def test_amp_verdict_separates_faster_from_slower(speedup: float, verdict: str, holds: bool) -> None:
    got = claim(*AMP_CLAIM, 1.5, 3.0, speedup, better="higher")
    assert (got["verdict"], got["holds"]) == (verdict, holds)


def test_a_cost_below_its_bound_holds_and_above_fails() -> None:
    assert claim(*CLIP_CLAIM, None, 0.3, 0.1, better="lower")["verdict"] == "holds"
    assert claim(*CLIP_CLAIM, None, 0.3, 2.3, better="lower")["verdict"] == "fails"


def _doc(figures: list[dict[str, Any]]) -> dict[str, Any]:
    run = h100_run()
    return {"device": run["device"], "quick": True, "figures": figures, "skipped": [], "regressions": []}


def test_report_never_says_fails_for_faster_than_claimed() -> None:
    """The H100's AMP figure, pushed above 3x, reads 'better than the published figure', never FAILS."""
    from rich.console import Console

    fig = h100_figure("amp.bfloat16.speedup")
    fig.update(value=4.1, claim=claim(*AMP_CLAIM, 1.5, 3.0, 4.1, better="higher"), unit_name="bench.amp")
    doc = _doc([fig])
    notes = render_notes(doc)
    assert notes[0].startswith(
        f"{fig['label']}: measured 4.1 x, better than the published figure (not a fault)"
    )
    console = Console(width=200, record=True)
    console.print(render_table(doc))
    text = console.export_text()
    assert "FAILS" not in text and "better (1.5-3)" in text and "published figure" in text


def test_report_says_the_h100_clip_share_is_not_comparable() -> None:
    """The real H100 run printed 'claim FAILS' for a 2.3% clip share of a 16 ms transformer step."""
    fig = h100_figure("clip.overhead_pct")
    why = "not comparable: the claim is for a ResNet-50 step on an A100; this step is a 2-layer transformer"
    fig.update(
        claim=claim(*CLIP_CLAIM, None, 0.3, fig["value"], better="lower", not_comparable=why),
        unit_name="bench.clip",
    )
    (line,) = render_notes(_doc([fig]))
    assert (
        "not comparable with the published figure: clip_grad_norm_ costs under 0.3%" in line and why in line
    )
    assert "FAILS" not in line


def test_notes_list_a_units_performance_finding_and_nothing_else() -> None:
    """A bench unit's WARN with a performance code (perf.relative's, dist.busbw's floor) is a note; another code is not."""
    doc = {
        **_doc([]),
        "units": [
            {
                "name": "bench.relative",
                "status": "warn",
                "code": "perf.hbm_slow",
                "summary": "GPU 3's HBM copy is 21% slow",
            },
            {
                "name": "bench.allreduce",
                "status": "fail",
                "code": "perf.busbw_low",
                "summary": "busbw 90 GB/s < 400",
            },
            {"name": "bench.matmul", "status": "warn", "code": "gpu.busy", "summary": "another process"},
            {"name": "bench.memory", "status": "pass", "code": "perf.hbm_slow", "summary": "fine"},
        ],
    }
    assert [n for n in render_notes(doc) if n.startswith(("WARN", "FAIL"))] == [
        "WARN bench.relative: GPU 3's HBM copy is 21% slow",
        "FAIL bench.allreduce: busbw 90 GB/s < 400",
    ]


def test_a_figure_outside_the_published_range_is_measured_and_differs_never_fails() -> None:
    """A bench measures; it is no verdict on the host: the CPU's AMP slow-down 'differs from the published figure',
    names where that figure was published (never a seed file or an issue number), and the twin inside the range
    'matches'."""
    from rich.console import Console

    slow = h100_figure("amp.bfloat16.speedup")
    slow.update(value=0.35, claim=claim(*AMP_CLAIM, 1.5, 3.0, 0.35, better="higher"), unit_name="bench.amp")
    ok = dict(slow, value=2.0, claim=claim(*AMP_CLAIM, 1.5, 3.0, 2.0, better="higher"))
    for fig, words, cell in (
        (slow, "differs from the published figure", "differs (1.5-3)"),
        (ok, "matches", "matches"),
    ):
        (line,) = render_notes(_doc([fig]))
        assert f"measured {fig['value']:.3g} x, {words}" in line and "mixed-precision training guides" in line
        console = Console(width=200, record=True)
        console.print(render_table(_doc([fig])))
        text = console.export_text()
        assert cell in text and "FAILS" not in text + line and "seed" not in (text + line).lower()
        assert "#" not in line and "issue" not in line


def test_a_spread_that_says_nothing_reads_noisy() -> None:
    """±2713% (three round medians on a busy 2-core machine) is no spread a reader can use: the cell says 'noisy' and
    a note says why; a quiet figure keeps its ±N%."""
    from envcheck.perf.report import spread_text

    assert spread_text({"spread_pct": 2713.0}) == "noisy" and spread_text({"spread_pct": 6.4}) == "±6%"
    assert spread_text(None) == ""
    fig = h100_figure("amp.bfloat16.speedup")
    noisy = dict(fig, claim=None, timing={**(fig.get("timing") or {}), "spread_pct": 330.0})
    assert any(n.startswith("noisy: ") for n in render_notes(_doc([noisy])))
    quiet = dict(fig, claim=None, timing={**(fig.get("timing") or {}), "spread_pct": 3.0})
    assert not any(n.startswith("noisy") for n in render_notes(_doc([quiet])))


def test_a_cpu_bench_runs_only_the_units_that_run_here() -> None:
    """Without a GPU the bench runs (and announces) the CPU variants only; --only still runs what it names."""
    from envcheck.app.bench import units_to_run
    from envcheck.perf.units import CPU_UNITS, GPU_UNITS

    assert units_to_run(False, None) == CPU_UNITS and units_to_run(True, None) == GPU_UNITS
    assert [s.name for s in units_to_run(False, "bench.matmul")] == ["bench.matmul"]
