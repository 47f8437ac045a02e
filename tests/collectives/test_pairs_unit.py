"""dist.pairs' pure parts: the round-robin schedule and the verdict (figures as measured on the 3-node fixture).

The rank side runs for real in tests/cluster/test_multinode_pairs.py; these pin the rules it is judged by.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from envcheck.collectives.pair_verdict import SLOW_CODE, WRONG_CODE, judge, reference_gbps
from envcheck.collectives.torchrun import TorchrunOptions, checks_to_run
from envcheck.collectives.tournament import rounds
from envcheck.core.check import DistOptions
from envcheck.core.result import Status


@pytest.mark.parametrize("n", range(2, 12))
def test_every_pair_once_no_node_twice_in_a_round_in_o_of_n_rounds(n: int) -> None:
    schedule = rounds(n)
    assert len(schedule) == (n - 1 if n % 2 == 0 else n)
    played = [pair for one in schedule for pair in one]
    assert sorted(played) == list(itertools.combinations(range(n), 2))
    for one in schedule:
        nodes = [node for pair in one for node in pair]
        assert len(nodes) == len(set(nodes))
        assert len(one) == n // 2  # every node plays every round, but the one sitting out when n is odd


def test_fewer_than_two_nodes_have_no_rounds() -> None:
    assert rounds(0) == [] and rounds(1) == []
    with pytest.raises(ValueError):
        rounds(-1)


def findings(figures: dict[tuple[str, str], float], nodes: list[str], wrong: int = 0) -> list[dict[str, Any]]:
    rows = [
        {
            "round": i,
            "nodes": list(pair),
            "ranks": [],
            "bytes": 2 << 20,
            "iters": 3,
            "time_us": 1.0,
            "algbw_gbps": bw,
            "busbw_gbps": bw,
            "wrong": wrong if i == 1 else 0,
        }
        for i, (pair, bw) in enumerate(figures.items(), 1)
    ]
    return [{"rank": 0, "pairs": {"nodes": nodes, "rounds": len(rows), "rows": rows}}]


THREE = ["n1", "n2", "n3"]
HEALTHY = {("n2", "n3"): 0.5855, ("n1", "n3"): 0.6832, ("n1", "n2"): 0.7629}
N2_LIMITED = {("n2", "n3"): 0.0059, ("n1", "n3"): 0.7000, ("n1", "n2"): 0.0060}


def test_none_slow_passes_naming_the_slowest_pair() -> None:
    result = judge(findings(HEALTHY, THREE), "gloo", 3, DistOptions())
    assert result.status is Status.PASS and "slowest n2–n3 0.5855 GB/s" in result.summary
    assert result.measured["pairs"][0]["busbw_gbps"] == 0.5855


def test_one_slow_node_of_three_is_named_against_the_median_of_the_nodes_best_pairs() -> None:
    # A plain median of the three pairs is 0.0060 (n2 is in two of them); each node's best pair is not fooled.
    assert reference_gbps(THREE, findings(N2_LIMITED, THREE)[0]["pairs"]["rows"]) == 0.7
    result = judge(findings(N2_LIMITED, THREE), "gloo", 3, DistOptions())
    assert result.status is Status.WARN and result.code == SLOW_CODE and result.fault_class == "node"
    assert result.measured["slow_nodes"] == ["n2"]
    assert (
        "node n2 slow: every pair with it is below 0.5× the median node's best pair (0.7 GB/s)"
        in result.summary
    )
    strict = judge(findings(N2_LIMITED, THREE), "gloo", 3, DistOptions(strict_perf=True))
    assert strict.status is Status.FAIL and strict.code == SLOW_CODE


def test_a_slow_link_between_two_good_nodes_names_the_path_not_a_node() -> None:
    four = ["n1", "n2", "n3", "n4"]
    figures = {pair: 0.7 for pair in itertools.combinations(four, 2)}
    figures[("n1", "n3")] = 0.01
    result = judge(findings(figures, four), "gloo", 4, DistOptions())
    assert result.status is Status.WARN and result.measured["slow_nodes"] == []
    assert "pair n1–n3 0.01 GB/s busbw below" in result.summary and "the path between them" in result.summary


def test_two_nodes_need_a_floor_and_then_cannot_say_which_node() -> None:
    two = {("n1", "n2"): 0.0059}
    alone = judge(findings(two, ["n1", "n2"]), "gloo", 2, DistOptions())
    assert alone.status is Status.PASS and "give --min-busbw" in alone.summary
    floored = judge(findings(two, ["n1", "n2"]), "gloo", 2, DistOptions(min_busbw_gbps=0.05))
    assert floored.status is Status.WARN and "cannot say which one is slow" in floored.summary
    assert floored.expected == {"min_pair_busbw_gbps": 0.05}


def test_the_floor_wins_over_the_relative_rule() -> None:
    result = judge(findings(HEALTHY, THREE), "gloo", 3, DistOptions(min_busbw_gbps=0.6))
    assert result.status is Status.WARN and result.measured["slow_pairs"] == [["n2", "n3"]]


def test_wrong_elements_fail_whatever_the_speed() -> None:
    result = judge(findings(HEALTHY, THREE, wrong=5), "gloo", 3, DistOptions())
    assert result.status is Status.FAIL and result.code == WRONG_CODE and "#wrong 5" in result.summary


def test_one_node_skips() -> None:
    result = judge(
        [{"rank": 0, "pairs": {"nodes": ["vm"], "rounds": 0, "rows": []}}], "gloo", 2, DistOptions()
    )
    assert result.status is Status.SKIP and "one node (vm)" in result.summary


def test_pairwise_or_full_runs_dist_pairs() -> None:
    def names(**kw: Any) -> list[str]:
        return [check.name for check in checks_to_run(TorchrunOptions(allow_cpu=True, timeout_s=10, **kw))]

    assert "dist.pairs" not in names(full=False)
    assert names(full=False, pairwise=True)[-1] == "dist.pairs"
    assert names(full=True)[-2:] == ["dist.busbw", "dist.pairs"]
