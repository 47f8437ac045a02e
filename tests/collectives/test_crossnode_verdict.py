"""The roll call's pure verdict (dist.rendezvous); every cause is also built for real in
tests/cluster/test_multinode_faults.py. Here: the order of causes, thresholds, and a clean roll call."""

from __future__ import annotations

from typing import Any

from envcheck.collectives.crossnode import SKEW_FAIL_S, SKEW_WARN_S, judge_roll_call
from envcheck.core.result import Status

MASTER = {
    "name": "n1",
    "port": 29500,
    "node": "n1",
    "addresses": ["10.77.0.11"],
    "error": None,
    "time": 100.0,
}
V = {"torch": "2.13.0", "nccl": None, "envcheck": "0.1.0", "python": "3.11.2"}


def arrival(rank: int, node: str, t: float = 100.0, **kw: Any) -> dict[str, Any]:
    return {"rank": rank, "node": node, "versions": dict(V), "interfaces": [], "reach": None, "time": t, **kw}


def test_clean_roll_call_is_no_result() -> None:
    arrivals = {0: arrival(0, "n1"), 1: arrival(1, "n2")}
    assert judge_roll_call(2, arrivals, MASTER, ["n1", "n2"], 1.0, {0: 100.0, 1: 100.0}) is None


def test_missing_rank_comes_first_and_names_its_node() -> None:
    arrivals = {0: arrival(0, "n1"), 1: arrival(1, "n2", versions={**V, "torch": "2.12.0"})}
    result = judge_roll_call(6, arrivals, MASTER, ["n1", "n2", "n3", "n3", "n3", "n3"], 12.0, {})
    assert result is not None and result.status is Status.FAIL and result.name == "dist.rendezvous"
    assert result.summary.startswith(
        "rank 2 (on n3), rank 3 (on n3), rank 4 (on n3), rank 5 (on n3) never reached "
        "the rendezvous store n1:29500 within 12s"
    )
    assert result.summary.endswith("versions differ across nodes: torch 2.13.0 on n1, 2.12.0 on n2")


def test_clock_skew_warns_then_fails() -> None:
    arrivals = {0: arrival(0, "n1"), 1: arrival(1, "n2", t=100.0 + SKEW_WARN_S + 1)}
    warn = judge_roll_call(2, arrivals, MASTER, None, 1.0, {0: 100.0, 1: 100.0})
    assert (
        warn is not None
        and warn.status is Status.WARN
        and warn.summary.startswith("n2's clock is 6.0s ahead")
    )
    arrivals[1]["time"] = 100.0 - SKEW_FAIL_S - 1
    fail = judge_roll_call(2, arrivals, MASTER, None, 1.0, {0: 100.0, 1: 100.0})
    assert fail is not None and fail.status is Status.FAIL and "16.0s behind n1's" in fail.summary
