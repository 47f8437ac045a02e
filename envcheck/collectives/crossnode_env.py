"""The roll call's verdicts on what each node brings: interface variables, versions and clocks (pure functions of
the arrivals; envcheck.collectives.crossnode puts them after the causes that stop the arrival itself).

Clock: torch elastic's c10d rendezvous compares wall-clock heartbeats across nodes and drops a node whose last
beat is older than keep_alive_interval x keep_alive_max_attempt (5 s x 3 by default;
torch/distributed/elastic/rendezvous/dynamic_rendezvous.py, `_remove_dead_nodes` and `should_keep_alive`). Each
node's first rank measures its own offset from the Slurm controller's clock (envcheck.probe.slurm_view), a clock
that is not one of the nodes judged, so rank 0's own node can be the one named. Without Slurm, the only reference
is rank 0's clock, and the verdict says that either node may be the wrong one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envcheck.collectives.crossnode_codes import CLOCK_SKEW, INTERFACE, VERSIONS
from envcheck.core.result import FaultClass, Result, failed, warned

Arrivals = Mapping[int, Mapping[str, Any]]
SKEW_WARN_S = 5.0  # one keep-alive interval
SKEW_FAIL_S = 15.0  # keep_alive_interval x keep_alive_max_attempt: torch elastic then calls the node dead
VERSION_KEYS = ("torch", "nccl", "envcheck", "python")


def _said(problem: Mapping[str, Any]) -> str:
    """The variable's verdict without its leading `VAR=value: ` (the summary names them once)."""
    return str(problem["text"]).removeprefix(f"{problem['var']}={problem['value']}: ")


def interface_result(arrivals: Arrivals) -> Result | None:
    """A variable that selects nothing usable on some node: FAIL when this run's backend reads it, WARN when it
    does not (it breaks a job on the other backend) or when the library falls back (NCCL_IB_HCA: TCP sockets)."""
    bad: dict[tuple[str, str], dict[str, Any]] = {}
    for f in arrivals.values():
        for p in (f.get("look") or {}).get("interfaces", []):
            bad.setdefault((str(f["node"]), p["var"]), p)
    if not bad:
        return None
    breaking = {k: p for k, p in bad.items() if p["used"] and p["status"] == "fail"}
    chosen = breaking or bad
    (node, var), first = next(iter(chosen.items()))
    nodes = sorted({n for n, _ in chosen})
    named = (
        _said(first) if len(chosen) == 1 else "; ".join(f"on {n}: {_said(p)}" for (n, _), p in chosen.items())
    )
    measured = {"problems": list(bad.values()), "nodes": nodes}
    if breaking:
        return failed(
            f"{var}={first['value']} names no usable interface on {', '.join(nodes)}: {named}",
            f"on {node}: {first['fix']}",
            measured=measured,
            fault_class=FaultClass.CONFIG,
            code=INTERFACE,
        )
    why = (
        "this run's backend does not read it, so it did not fail here; a job whose backend reads it fails there"
        if not first["used"]
        else "the library falls back (slower, not broken)"
    )
    return warned(
        f"{var}={first['value']} on {', '.join(nodes)} selects nothing usable ({why}): {named}",
        f"on {node}: {first['fix']}",
        measured=measured,
        fault_class=FaultClass.CONFIG,
        code=INTERFACE,
    )


def _by_value(arrivals: Arrivals, key: str) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for found in arrivals.values():
        nodes = groups.setdefault(str(found["versions"].get(key)), [])
        if str(found["node"]) not in nodes:
            nodes.append(str(found["node"]))
    return groups


def versions_result(arrivals: Arrivals) -> Result | None:
    """torch, NCCL, envcheck or Python versions that differ across the ranks."""
    differ = {key: g for key in VERSION_KEYS if len(g := _by_value(arrivals, key)) > 1}
    if not differ:
        return None
    text = "; ".join(
        f"{key} " + ", ".join(f"{v} on {', '.join(nodes)}" for v, nodes in groups.items())
        for key, groups in differ.items()
    )
    minority = sorted({n for groups in differ.values() for n in min(groups.values(), key=len)})
    return failed(
        f"versions differ across nodes: {text}",
        "run every node from the same image or environment (same torch, NCCL and envcheck); "
        "`python -m envcheck facts` on each node shows which one drifted",
        measured={"differ": differ, "nodes": minority},
        fault_class=FaultClass.IMAGE,
        code=VERSIONS,
    )


def _sign(seconds: float, reference: str) -> str:
    return f"{abs(seconds):.1f}s {'ahead of' if seconds > 0 else 'behind'} {reference}"


def clock_result(
    arrivals: Arrivals, seen_at: Mapping[int, float], master: Mapping[str, Any]
) -> Result | None:
    """A node whose wall clock is off: against the Slurm controller's when the nodes measured it, else rank 0's."""
    offsets = {
        str(f["node"]): float(f["look"]["clock"]["offset_s"])
        for f in arrivals.values()
        if (f.get("look") or {}).get("clock")
    }
    fix_for = "sync {0}'s clock (`chronyc tracking` / `timedatectl show` on {0}) before a multi-node run"
    if offsets:
        skewed = {n: o for n, o in offsets.items() if abs(o) >= SKEW_WARN_S}
        if not skewed:
            return None
        spread = max(offsets.values()) - min(offsets.values())
        measured = {"skew_s": offsets, "reference": "slurmctld", "nodes": sorted(skewed)}
        if len(offsets) > 1 and spread < SKEW_WARN_S:
            mean = sum(offsets.values()) / len(offsets)
            return warned(
                f"every node's clock is about {_sign(mean, 'the Slurm controller')}'s, and the nodes agree with "
                f"each other (within {spread:.1f}s): the controller's clock is the odd one",
                "sync the Slurm controller's clock (`chronyc tracking` on the slurmctld host)",
                measured={**measured, "nodes": ["slurmctld"]},
                fault_class=FaultClass.NODE,
                code=CLOCK_SKEW,
            )
        worst = max(skewed, key=lambda n: abs(skewed[n]))
        calm = {n: o for n, o in offsets.items() if n not in skewed}
        within = f" ({', '.join(calm)}: within {max(abs(o) for o in calm.values()):.1f}s)" if calm else ""
        text = (
            "; ".join(
                f"{n}'s clock is {_sign(o, 'the Slurm controller')}'s" for n, o in sorted(skewed.items())
            )
            + f"{within}: torch elastic's rendezvous drops a node whose heartbeat looks {SKEW_FAIL_S:g}s old"
        )
        make = failed if abs(skewed[worst]) >= SKEW_FAIL_S and spread >= SKEW_FAIL_S else warned
        return make(
            text, fix_for.format(worst), measured=measured, fault_class=FaultClass.NODE, code=CLOCK_SKEW
        )
    skews = {str(f["node"]): float(f["time"]) - seen_at[r] for r, f in arrivals.items() if r in seen_at}
    node, skew = max(skews.items(), key=lambda kv: abs(kv[1]), default=("", 0.0))
    if abs(skew) < SKEW_WARN_S:
        return None
    text = (
        f"{node}'s clock is {_sign(skew, master['node'])}'s (rank 0; with no independent clock to judge by, either "
        f"may be the wrong one): torch elastic's rendezvous drops a node whose heartbeat looks {SKEW_FAIL_S:g}s old"
    )
    measured = {"skew_s": {n: round(s, 3) for n, s in skews.items()}, "reference": "rank 0", "nodes": [node]}
    make = failed if abs(skew) >= SKEW_FAIL_S else warned
    return make(
        text,
        fix_for.format(f"{node} or {master['node']}"),
        measured=measured,
        fault_class=FaultClass.NODE,
        code=CLOCK_SKEW,
    )
