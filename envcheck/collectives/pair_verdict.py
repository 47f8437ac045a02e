"""The verdict of `dist.pairs`: the slowest pair against a floor, and the node to blame when one node explains it.

The floor is `--min-busbw` when given (busbw is normalised so that it does not depend on the rank count, so the
job-wide floor applies to a pair: nccl-tests' PERFORMANCE.md). Without one, the measurement is its own reference,
as GCP's cluster-health-scanner does it: a pair is slow below SLOW_FRACTION of the median over nodes of each
node's best pair. A node's best pair shows what it can do with its best partner, so one slow node cannot drag the
reference down even at three nodes, where it is in two of the three pairs (a plain median of the pairs would be
its own slow figure). The node named is the one whose every pair is slow: the all-pairs form of the scanner's
second pass, which pairs a failed pair's nodes with known-good nodes to tell which one is bad.
"""

from __future__ import annotations

from statistics import median
from typing import Any

from envcheck.core.check import DistOptions
from envcheck.core.result import FaultClass, Result, failed, passed, skipped, warned

NAME = "dist.pairs"
SLOW_FRACTION = 0.5
SLOW_CODE = "dist.pair.slow"
WRONG_CODE = "dist.pair.wrong"
SLOW_FIX = (
    "Check the named node's fabric: link speed and errors (`ibstat`, `ethtool IFACE`, `ip -s link`), its "
    "cable and switch port, and the transport NCCL picked (NCCL_DEBUG=INFO: NET/IB expected, not "
    "NET/Socket); drain it and rerun without it to confirm"
)


def pair_name(row: dict[str, Any]) -> str:
    return "–".join(row["nodes"])


def reference_gbps(nodes: list[str], rows: list[dict[str, Any]]) -> float:
    """The median over nodes of each node's best pair busbw."""
    return float(median(max(r["busbw_gbps"] for r in rows if node in r["nodes"]) for node in nodes))


def table(rows: list[dict[str, Any]]) -> str:
    """One line per pair: round, nodes, bytes, time, algbw, busbw, #wrong."""
    lines = [
        f"{'round':>5}  {'pair':<24} {'bytes':>10} {'time(us)':>12} {'algbw(GB/s)':>12} {'busbw(GB/s)':>12} "
        f"{'#wrong':>6}"
    ]
    lines += [
        f"{r['round']:>5}  {pair_name(r):<24} {r['bytes']:>10} {r['time_us']:>12.1f} {r['algbw_gbps']:>12.4f} "
        f"{r['busbw_gbps']:>12.4f} {r['wrong']:>6}"
        for r in rows
    ]
    return "\n".join(lines)


def _figures(rows: list[dict[str, Any]]) -> str:
    return ", ".join(f"{pair_name(r)} {r['busbw_gbps']:.4g} GB/s" for r in rows)


def judge(findings: list[dict[str, Any]], backend: str, world: int, options: DistOptions) -> Result:
    """PASS, or WARN (FAIL with --strict-perf) naming the slow node or pair; FAIL on any wrong element."""
    nodes: list[str] = findings[0]["pairs"]["nodes"]
    rows = sorted(
        (row for f in findings for row in f["pairs"]["rows"]), key=lambda r: (r["round"], r["nodes"])
    )
    if len(nodes) < 2:
        return skipped(
            f"all {world} ranks are on one node ({nodes[0] if nodes else '?'}): dist.pairs needs ranks "
            "on two or more nodes"
        )
    rounds = findings[0]["pairs"]["rounds"]
    measured: dict[str, Any] = {
        "backend": backend,
        "world_size": world,
        "nodes": nodes,
        "rounds": rounds,
        "pairs": rows,
    }
    head = f"{len(rows)} node pair(s) of {len(nodes)} nodes in {rounds} round(s)"
    wrong = [r for r in rows if r["wrong"]]
    if wrong:
        return failed(
            f"{head}: all_reduce gave wrong results between {', '.join(pair_name(r) for r in wrong)} "
            f"(#wrong {sum(r['wrong'] for r in wrong)})",
            "Wrong results between two nodes mean silent "
            "data corruption on the path between them: check both nodes' NICs and dmesg, and keep them out "
            "of jobs until fixed",
            measured=measured,
            details=table(rows),
            fault_class=FaultClass.NODE,
            code=WRONG_CODE,
        )
    slowest = min(rows, key=lambda r: r["busbw_gbps"])
    measured["slowest_pair"] = slowest["nodes"]
    measured["slowest_busbw_gbps"] = slowest["busbw_gbps"]
    if options.min_busbw_gbps is not None:
        floor = options.min_busbw_gbps
        basis = f"the {floor:g} GB/s floor (--min-busbw)"
        measured["floor_gbps"] = floor
    elif len(nodes) >= 3:
        reference = reference_gbps(nodes, rows)
        floor = SLOW_FRACTION * reference
        basis = f"{SLOW_FRACTION:g}× the median node's best pair ({reference:.4g} GB/s)"
        measured.update(reference_gbps=reference, slow_fraction=SLOW_FRACTION, floor_gbps=floor)
    else:
        return passed(
            f"{head}: {_figures(rows)} busbw (one pair has nothing to compare with: give --min-busbw "
            "to judge it)",
            measured=measured,
            details=table(rows),
        )
    slow = [r for r in rows if r["busbw_gbps"] < floor]
    if not slow:
        return passed(
            f"{head}: slowest {pair_name(slowest)} {slowest['busbw_gbps']:.4g} GB/s busbw, at or above "
            f"{basis}",
            measured=measured,
            expected={"min_pair_busbw_gbps": floor},
            details=table(rows),
        )
    culprits = [n for n in nodes if all(r in slow for r in rows if n in r["nodes"])]
    measured.update(slow_pairs=[r["nodes"] for r in slow], slow_nodes=culprits)
    if len(nodes) == 2:
        text = (
            f"the only pair {_figures(slow)} busbw is below {basis}; with two nodes it cannot say which one is "
            "slow: rerun with a third node"
        )
    elif culprits:
        text = (
            f"node{'s' if len(culprits) > 1 else ''} {', '.join(culprits)} slow: every pair with "
            f"{'them' if len(culprits) > 1 else 'it'} is below {basis}: {_figures(slow)} busbw"
        )
    else:
        text = (
            f"pair{'s' if len(slow) > 1 else ''} {_figures(slow)} busbw below {basis}, while each of those "
            "nodes is fast with the others: the path between them (switch, route, cable)"
        )
    make = failed if options.strict_perf else warned
    return make(
        f"{head}: {text}",
        SLOW_FIX,
        measured=measured,
        expected={"min_pair_busbw_gbps": floor},
        details=table(rows),
        fault_class=FaultClass.NODE,
        code=SLOW_CODE,
    )
