"""ddp.differential with real gloo ranks (forked by the shared launcher, so a patch made here is what the ranks run):
the healthy twin, an injected hook fault named by its option set, and the verdict's pure parts. SyncBatchNorm needs
CUDA ranks: on gloo the check says it did not apply; on a GPU host the gpu-marked test runs it (unverified here)."""

from __future__ import annotations

from dataclasses import asdict

import pytest
import torch

from envcheck.checks.dist.launches import ddp_differential
from envcheck.collectives import ddp
from envcheck.core.check import Context, DistOptions, Level
from envcheck.core.result import Status
from envcheck.reference.compare import compare
from tests.helpers import processes_with_marker, run_check
from tests.numerics.corpus.step_injectors import allreduce_hook_without_division, fp16_hook_sums_first

FULL = Context(level=Level.FULL, allow_cpu=True)


@pytest.fixture
def marker(monkeypatch: pytest.MonkeyPatch) -> str:
    value = "envcheck-ddp-test"
    monkeypatch.setenv("ENVCHECK_TEST_MARKER", value)
    return value


def test_healthy_ddp_equals_one_process_on_the_whole_batch(marker: str) -> None:
    """Real engine, real ranks. torch 2.13 and 2.14 carry pytorch#187732 (static_graph + no_sync asserts), which
    the check names as a known, unfixed upstream bug (WARN); every other option set must match."""
    result = run_check("ddp.differential", cpu_ranks=2)
    assert result.status in (Status.PASS, Status.WARN), (result.summary, result.details)
    bf16 = [c for c in ddp.cases() if c.hook == "bf16_compress"]  # bf16 compression needs NCCL
    asserted = 0
    if result.status is Status.WARN:
        assert list(result.measured["known_upstream_bugs"]) == [
            "https://github.com/pytorch/pytorch/pull/187732"
        ]
        asserted = sum(1 for c in ddp.cases() if c.static and c.accumulate == 2 and c.hook != "bf16_compress")
    assert result.measured["cases"] == len(ddp.cases()) - len(bf16) - asserted
    assert list(result.measured["not_applicable"].values()) == [len(bf16)]
    assert "not run on gloo" in result.measured["sync_batchnorm"]
    assert processes_with_marker(marker) == []


def test_a_hook_that_forgets_to_divide_is_named_by_its_option_set() -> None:
    with allreduce_hook_without_division():
        result = ddp_differential(FULL)
    assert result.status is Status.FAIL
    assert "hook=allreduce" in result.summary and "param" in result.summary


def test_fp16_hook_that_sums_before_dividing_overflows_only_with_large_gradients() -> None:
    with fp16_hook_sums_first():
        result = ddp_differential(FULL)
    assert result.status is Status.FAIL
    bad = [line for line in result.details.splitlines() if "got" in line]
    assert bad and all("same shard on every rank" in line for line in bad if "hook=fp16_compress" in line)


def _finding(digest: str, ok: bool = True) -> dict[str, object]:
    c = compare(
        torch.tensor([1.0]),
        torch.tensor([1.0 if ok else 2.0]),
        op="DDP(x) param 0",
        device="cpu",
        dtype="float32",
        atol=1e-6,
        rtol=0.0,
    )
    return {
        "ddp": {"comparisons": [asdict(c)], "digests": {"DDP(x)": digest}, "errors": [], "not_applicable": []}
    }


def test_verdict_wants_identical_replicas() -> None:
    found = [{"rank": 0, **_finding("aa")}, {"rank": 1, **_finding("bb")}]
    result = ddp.judge(found, "gloo", 2, DistOptions())
    assert result.status is Status.FAIL and "ranks ended with different parameters" in result.summary


def test_verdict_passes_identical_replicas_within_tolerance() -> None:
    found = [{"rank": 0, **_finding("aa")}, {"rank": 1, **_finding("aa")}]
    assert ddp.judge(found, "gloo", 2, DistOptions()).status is Status.PASS


def test_option_space_covers_every_pair_of_option_values() -> None:
    """Every pair of values of two options meets in some case (the product's 128 cases cost a full run about
    15 s of CPU), with the two large-gradient fp16 cases; the held bugs' pairs are among them."""
    import itertools

    grid = [c for c in ddp.cases() if c.scale == 1]
    values = [(c.bucket, c.view, c.static, c.unused, c.hook, c.accumulate) for c in grid]
    levels = [sorted({v[i] for v in values}, key=str) for i in range(6)]
    for i, j in itertools.combinations(range(6), 2):
        assert {(v[i], v[j]) for v in values} == set(itertools.product(levels[i], levels[j])), (i, j)
    assert levels[4] == sorted(ddp.HOOKS, key=str) and len(grid) < 2 * 2 * 2 * 2 * len(ddp.HOOKS) * 2 / 8
    assert any(c.static and c.accumulate == 2 for c in grid)  # pytorch#187732's pair
    assert len(ddp.cases()) - len(grid) == 2


@pytest.mark.gpu
def test_nccl_ranks_run_ddp_and_sync_batchnorm() -> None:
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device: NCCL ranks and SyncBatchNorm need GPUs")
    result = run_check("ddp.differential", allow_cpu=False)
    assert result.status in (Status.PASS, Status.WARN), result.details
    assert result.measured["backend"] == "nccl" and "sync_batchnorm" not in result.measured
