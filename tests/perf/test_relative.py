"""The relative verdict (envcheck.perf.relative), pure, on generated figures of an 8-GPU node.

Staged: the figures (values shaped like a real H100's, tests/perf/data/h100_bench_quick.json: bf16 ~790 TFLOP/s, TF32
~400, HBM copy ~3000 GB/s, pinned H2D/D2H ~53 GB/s). Real: the verdict, the Result it builds and its codes. Every
fault test also asserts that no other GPU or pair is named.
"""

from __future__ import annotations

from typing import Any

import pytest

from envcheck.core.result import FaultClass, Status
from envcheck.perf.relative import CODES, KINDS, common_gpu, judge, slow_findings

NORMAL = {
    "matmul.bfloat16": (790.0, "TFLOP/s"),
    "matmul.tf32": (400.0, "TFLOP/s"),
    "hbm": (3000.0, "GB/s"),
    "h2d": (53.0, "GB/s"),
    "d2h": (55.0, "GB/s"),
}
PEER_GBPS = 380.0


def fig(kind: str, subject: str, value: float, unit: str = "GB/s", scope: str = "gpu") -> dict[str, Any]:
    label = f"GPU {subject}" if scope == "gpu" else "GPU {} -> GPU {}".format(*subject.split("-"))
    return {
        "key": f"{kind}.gpu{subject}",
        "label": f"{label} {kind}",
        "value": value,
        "unit": unit,
        "better": "higher",
        "kind": kind,
        "scope": scope,
        "subject": subject,
        "device_label": label,
    }


def node(gpus: int = 8, scale: dict[tuple[str, str], float] | None = None) -> list[dict[str, Any]]:
    """Figures of a healthy node (a small healthy spread, +-2%), with `scale[(kind, subject)]` applied."""
    scale = scale or {}
    out = []
    for i in range(gpus):
        wobble = 1.0 + 0.02 * ((i * 7) % 5 - 2) / 2  # -2% .. +2%, deterministic
        for kind, (value, unit) in NORMAL.items():
            out.append(fig(kind, str(i), round(value * wobble * scale.get((kind, str(i)), 1.0), 2), unit))
    for i in range(gpus):
        for j in range(i + 1, gpus):
            s = scale.get(("peer", str(i)), 1.0) * scale.get(("peer", str(j)), 1.0)
            out.append(fig("peer", f"{i}-{j}", PEER_GBPS * s, scope="pair"))
    return out


def named(result: Any) -> set[tuple[str, str]]:
    return {(f["code"], f["subject"]) for f in result.measured.get("findings", [])}


@pytest.mark.parametrize(
    "kind, code",
    [
        ("matmul.bfloat16", "perf.matmul_slow"),
        ("matmul.tf32", "perf.matmul_slow"),
        ("hbm", "perf.hbm_slow"),
        ("h2d", "perf.h2d_slow"),
        ("d2h", "perf.d2h_slow"),
    ],
)
@pytest.mark.parametrize("gpu", ["0", "5", "7"])
def test_one_slow_gpu_is_named_with_its_figure_and_the_best(kind: str, code: str, gpu: str) -> None:
    result = judge(node(scale={(kind, gpu): 0.8}))
    assert result.status is Status.WARN and result.fault_class is FaultClass.NODE and result.code == code
    assert named(result) == {(code, gpu)}  # that GPU, and no other
    (finding,) = result.measured["findings"]
    best = max((f for f in node() if f["kind"] == kind), key=lambda f: f["value"])
    assert finding["best_label"] == best["device_label"] != f"GPU {gpu}"
    assert (
        result.summary.startswith(f"GPU {gpu}: ")
        and f"below the node's best ({best['device_label']}: " in result.summary
    )
    assert "margin 10%" in result.summary and f"-i {gpu}" in (result.remediation or "")


def test_strict_perf_makes_it_a_failure() -> None:
    result = judge(node(scale={("matmul.bfloat16", "2"): 0.5}), strict=True)
    assert (
        result.status is Status.FAIL
        and result.code == "perf.matmul_slow"
        and named(result) == {("perf.matmul_slow", "2")}
    )


def test_within_the_margin_passes_and_the_margin_is_a_setting() -> None:
    assert (
        judge(node(scale={("hbm", "3"): 0.93})).status is Status.PASS
    )  # 7% below, plus the wobble: 9.6% < 10%
    twenty = node(scale={("hbm", "3"): 0.8})
    assert judge(twenty).status is Status.WARN
    assert judge(twenty, margin_pct=25).status is Status.PASS
    assert named(judge(twenty, margin_pct=5)) == {("perf.hbm_slow", "3")}  # the healthy +-2% stays under 5%


def test_a_node_whose_gpus_are_all_equally_slow_is_left_to_the_fleet_baseline() -> None:
    everything = {(kind, str(i)): 0.5 for kind in (*NORMAL, "peer") for i in range(8)}
    result = judge(node(scale=everything))
    assert result.status is Status.PASS and "8 GPUs within 10% of the node's best" in result.summary


def test_a_gpu_whose_links_are_slow_is_named_through_its_pairs() -> None:
    result = judge(node(scale={("peer", "3"): 0.5}))
    pairs = {s for c, s in named(result)}
    assert {c for c, _ in named(result)} == {"perf.peer_slow"}
    assert pairs == {
        f"{min(i, 3)}-{max(i, 3)}" for i in range(8) if i != 3
    }  # the 7 pairs with GPU 3, no other
    assert result.measured["suspect_gpu"] == "3" and "GPU 3 is in every slow pair" in result.summary
    assert "nvlink -s -i 3" in (result.remediation or "")


def test_one_slow_pair_names_the_pair_and_no_gpu() -> None:
    figures = node()
    for f in figures:
        if f["subject"] == "1-6":
            f["value"] = PEER_GBPS * 0.6
    result = judge(figures)
    assert named(result) == {("perf.peer_slow", "1-6")} and result.measured["suspect_gpu"] is None
    assert result.summary.startswith("GPU 1 -> GPU 6: peer copy")


def test_two_faults_of_different_kinds_are_both_named_worst_first() -> None:
    result = judge(node(scale={("d2h", "4"): 0.7, ("matmul.bfloat16", "6"): 0.85}))
    assert named(result) == {("perf.d2h_slow", "4"), ("perf.matmul_slow", "6")}
    assert result.code == "perf.d2h_slow" and result.measured["codes"] == [
        "perf.d2h_slow",
        "perf.matmul_slow",
    ]
    assert "(+1 more)" in result.summary


def test_a_gpu_busy_with_another_job_is_not_judged_nor_its_pairs() -> None:
    busy = {"2": "1 other process(es) on the GPU (PIDs 4242)"}
    result = judge(node(scale={("matmul.bfloat16", "2"): 0.4, ("peer", "2"): 0.4}), excluded=busy)
    assert (
        result.status is Status.PASS
        and "GPU 2 not judged: 1 other process(es) on the GPU (PIDs 4242)" in result.summary
    )
    # a busy GPU that is the fastest must not make healthy ones look slow either
    fast = judge(node(scale={("matmul.bfloat16", "2"): 1.5}), excluded=busy)
    assert fast.status is Status.PASS


def test_one_gpu_has_nothing_to_compare() -> None:
    result = judge([f for f in node(gpus=1)])
    assert result.status is Status.PASS and result.summary.startswith("one GPU measured")
    assert "envcheck fleet" in result.summary


def test_figures_the_verdict_does_not_judge_are_left_alone() -> None:
    figures = node()
    figures += [fig("step_ms", str(i), 10.0 * (1 + i)) | {"better": "lower"} for i in range(8)]
    figures += [fig("mystery", str(i), 1.0 + i) for i in range(8)]
    figures += [fig("matmul.bfloat16", "9", float("nan"), "TFLOP/s")]
    assert judge(figures).status is Status.PASS


def test_common_gpu_needs_two_pairs_sharing_exactly_one_gpu() -> None:
    found = slow_findings(
        [
            fig("peer", "0-1", 100.0, scope="pair"),
            fig("peer", "2-3", 100.0, scope="pair"),
            fig("peer", "0-2", 400.0, scope="pair"),
        ],
        10,
    )
    assert {f.subject for f in found} == {"0-1", "2-3"} and common_gpu(found) is None


def test_every_kind_has_a_stable_perf_code() -> None:
    assert set(CODES) == {
        "perf.matmul_slow",
        "perf.hbm_slow",
        "perf.h2d_slow",
        "perf.d2h_slow",
        "perf.peer_slow",
    }
    assert all(k.fix and k.code.startswith("perf.") for k in KINDS.values())
