"""envcheck.reference.known_bugs: a failure that is a cited upstream bug of this torch is a WARN naming it; the same
failure on a torch that fixed it, or any other failure, stays a FAIL; an unfixed bug says to avoid the option."""

from __future__ import annotations

import torch

from envcheck.core.result import Status
from envcheck.reference.compare import compare
from envcheck.reference.known_bugs import KNOWN_BUGS, affecting, judge_with_known_bugs

BAG = (
    "embedding_bag(mode=sum, per_sample_weights=False, input=offsets, padding_idx=None, scale_grad_by_freq=True, "
    "sparse=False, max_norm=None) weight gradient"
)
WRONG = {"atol": 1e-6, "rtol": 0.0, "device": "cpu", "dtype": "float32"}


def _judge(op: str, version: str, ok_too: bool = True) -> object:
    bad = compare(torch.tensor([1.0]), torch.tensor([2.0]), op=op, **WRONG)  # type: ignore[arg-type]
    good = compare(torch.tensor([1.0]), torch.tensor([1.0]), op="something else", **WRONG)  # type: ignore[arg-type]
    return judge_with_known_bugs(
        "what", [bad, good] if ok_too else [bad], tolerances={}, remediation="fix it", torch_version=version
    )


def test_known_bug_on_an_affected_torch_is_a_warn_naming_it_and_its_fix() -> None:
    result = _judge(BAG, "2.13.0+cpu")
    assert result.status is Status.WARN, result.summary  # type: ignore[attr-defined]
    assert "pytorch/issues/190063" in result.summary  # type: ignore[attr-defined]
    assert result.remediation.startswith("pip install 'torch>=2.14'")  # type: ignore[attr-defined]
    assert "https://github.com/pytorch/pytorch/issues/190063" in result.measured["known_upstream_bugs"]  # type: ignore[attr-defined]


def test_the_same_failure_on_a_torch_that_fixed_it_is_a_fail() -> None:
    result = _judge(BAG, "2.14.1+cu130")
    assert result.status is Status.FAIL  # type: ignore[attr-defined]


def test_an_unknown_failure_next_to_a_known_one_is_a_fail() -> None:
    bad = compare(torch.tensor([1.0]), torch.tensor([2.0]), op="embedding(padding_idx=2) output", **WRONG)  # type: ignore[arg-type]
    known = compare(torch.tensor([1.0]), torch.tensor([2.0]), op=BAG, **WRONG)  # type: ignore[arg-type]
    result = judge_with_known_bugs(
        "what", [bad, known], tolerances={}, remediation="fix it", torch_version="2.13.0"
    )
    assert result.status is Status.FAIL
    assert "embedding(padding_idx=2)" in result.summary


def test_an_unfixed_bug_says_to_avoid_the_option() -> None:
    result = judge_with_known_bugs(
        "what",
        [],
        tolerances={},
        remediation="x",
        torch_version="2.14.1",
        problems=[
            "rank 0: DDP(bucket=default, static_graph=True, hook=none, "
            "no_sync_accumulation=2): expect_autograd_hooks_ INTERNAL ASSERT"
        ],
    )
    assert result.status is Status.WARN
    assert "avoid the affected options" in (result.remediation or "")


def test_every_known_bug_is_cited_and_applies_to_some_torch() -> None:
    assert all(b.url.startswith("https://github.com/pytorch/pytorch/") for b in KNOWN_BUGS)
    assert {b.url for b in affecting("2.0.0")} == {b.url for b in KNOWN_BUGS}
    assert all(b.fixed_in is None for b in affecting("9.0"))


def test_a_bug_fixed_in_a_later_release_is_known_only_before_it() -> None:
    crash = (
        "Adagrad(default; lr=0.1) float32 cpu->cpu: KeyError: 'sum'"  # the check's problem line, torch 2.11
    )
    assert (
        judge_with_known_bugs(
            "what", [], tolerances={}, remediation="x", torch_version="2.11.0+cu130", problems=[crash]
        ).status
        is Status.WARN
    )
    assert (
        judge_with_known_bugs(
            "what", [], tolerances={}, remediation="x", torch_version="2.12.0", problems=[crash]
        ).status
        is Status.FAIL
    )


def test_a_cuda_only_bug_is_not_a_cpu_excuse() -> None:
    """The embedding renorm gap was measured on CUDA (docs/gpu-evidence/2026-11-24-nvidia-h100-80gb-hbm3/call-3): the
    same failure on the CPU is not that bug."""
    op = (
        "embedding(padding_idx=None, max_norm=1.0, norm_type=inf, scale_grad_by_freq=False, sparse=False) "
        "output"
    )
    on = {**WRONG, "device": "cuda:0"}
    cuda = compare(torch.tensor([-3.47]), torch.tensor([-1.0]), op=op, **on)  # type: ignore[arg-type]
    cpu = compare(torch.tensor([-3.47]), torch.tensor([-1.0]), op=op, **WRONG)  # type: ignore[arg-type]
    warned = judge_with_known_bugs("what", [cuda], tolerances={}, remediation="x", torch_version="2.11.0")
    assert warned.status is Status.WARN and "Embedding.cu" in warned.summary
    assert (
        "cuda:0"
        in warned.measured["known_upstream_bugs"][next(iter(warned.measured["known_upstream_bugs"]))][0]
    )
    assert (
        judge_with_known_bugs("what", [cpu], tolerances={}, remediation="x", torch_version="2.11.0").status
        is Status.FAIL
    )


FUSED_SGD = "SGD(momentum 0.9 & fused; lr=0.1, momentum=0.9, fused=True) bfloat16 cpu->cpu parameters"


def test_an_intermittent_bug_is_named_whether_this_run_met_it_or_not() -> None:
    """pytorch#191763 reads memory it never wrote: on torch 2.13 a fused-SGD bfloat16 run passes or fails with
    what the allocator hands out, so with what ran before in the worker (train.state_roundtrip once passed or
    warned by the order of the checks). On an affected torch the verdict is the WARN either way; on 2.14 a
    pass is a pass."""
    same = compare(torch.tensor([1.0]), torch.tensor([1.0]), op=FUSED_SGD, **WRONG)  # type: ignore[arg-type]
    differs = compare(torch.tensor([1.0]), torch.tensor([2.0]), op=FUSED_SGD, **WRONG)  # type: ignore[arg-type]
    met, missed = (
        judge_with_known_bugs("what", [c], tolerances={}, remediation="x", torch_version="2.13.0")
        for c in (differs, same)
    )
    assert met.status is missed.status is Status.WARN
    assert "pytorch/issues/191763" in missed.summary and "not judged" in missed.details
    fixed = judge_with_known_bugs("what", [same], tolerances={}, remediation="x", torch_version="2.14.1")
    assert fixed.status is Status.PASS
