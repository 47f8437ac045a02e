"""The roll call's verdict (`dist.rendezvous`): pure functions of what every rank said on arrival.

Causes, most basic first: a rank that never arrived (which rank, on which node), MASTER_ADDR that does not resolve
on a node (which name, from which node, what it resolves to elsewhere), a socket-interface variable naming an
interface a node lacks, versions that differ across nodes, and a node clock skewed enough to confuse timeouts.
Clock: torch elastic's c10d rendezvous compares wall-clock heartbeats across nodes and drops a node whose last
beat is older than keep_alive_interval x keep_alive_max_attempt (5 s x 3 by default;
torch/distributed/elastic/rendezvous/dynamic_rendezvous.py, `_remove_dead_nodes` and `should_keep_alive`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envcheck.collectives.verdicts import combine
from envcheck.core.result import FaultClass, Result, failed, warned

NAME = "dist.rendezvous"
# Finding codes of the roll call before a multi-node run (each one is in envcheck.cluster.finding_codes.TABLE).
MISSING_RANK = "dist.rendezvous.missing_rank"
UNRESOLVED = "dist.rendezvous.unresolved"
INTERFACE = "dist.rendezvous.interface"
VERSIONS = "dist.rendezvous.versions"
CLOCK_SKEW = "dist.rendezvous.clock_skew"
PORT_TAKEN = "dist.rendezvous.port_taken"
SKEW_WARN_S = 5.0  # one keep-alive interval
SKEW_FAIL_S = 15.0  # keep_alive_interval x keep_alive_max_attempt: torch elastic then calls the node dead
VERSION_KEYS = ("torch", "nccl", "envcheck", "python")


def _node_of(rank: int, arrivals: Mapping[int, Mapping[str, Any]], layout: list[str] | None) -> str:
    if rank in arrivals:
        return str(arrivals[rank]["node"])
    return layout[rank] if layout and rank < len(layout) else "an unknown node (not an srun step)"


def _by_value(arrivals: Mapping[int, Mapping[str, Any]], get: Any) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for found in arrivals.values():
        node = str(found["node"])
        nodes = groups.setdefault(str(get(found)), [])
        if node not in nodes:
            nodes.append(node)
    return groups


def _missing(
    world: int,
    arrivals: Mapping[int, Mapping[str, Any]],
    master: Mapping[str, Any],
    layout: list[str] | None,
    waited_s: float,
) -> Result | None:
    missing = [r for r in range(world) if r not in arrivals]
    if not missing:
        return None
    named = ", ".join(f"rank {r} (on {_node_of(r, arrivals, layout)})" for r in missing[:8])
    more = f" and {len(missing) - 8} more" if len(missing) > 8 else ""
    where = f"{master['name']}:{master['port']}"
    seen = (
        f"; {master['name']} resolves to {', '.join(master['addresses'])} on {master['node']}"
        if master.get("addresses")
        else ""
    )
    first = _node_of(missing[0], arrivals, layout)
    return failed(
        f"{named}{more} never reached the rendezvous store {where} within {waited_s:.0f}s{seen}",
        f"that rank's own line in the job's output says why; on {first}: `getent hosts {master['name']}` "
        f"and `python -c 'import socket; socket.create_connection((\"{master['name']}\", {master['port']}), 5)'` "
        "(a missing hosts/DNS entry, a down link, or a firewall on the port)",
        measured={"missing_ranks": missing, "arrived": len(arrivals), "world_size": world, "store": where},
        fault_class=FaultClass.NODE,
        code=MISSING_RANK,
    )


def _unresolved(arrivals: Mapping[int, Mapping[str, Any]], master: Mapping[str, Any]) -> Result | None:
    lost = [f for f in arrivals.values() if f.get("reach") and not f["reach"]["addresses"]]
    if not lost:
        return None
    name = master["name"]
    nodes = sorted({str(f["node"]) for f in lost})
    found = lost[0]["reach"]
    elsewhere = {
        str(f["node"]): f["reach"]["addresses"]
        for f in arrivals.values()
        if f.get("reach") and f["reach"]["addresses"]
    }
    if master.get("addresses"):
        elsewhere.setdefault(str(master["node"]), master["addresses"])
    seen = "; ".join(f"on {n}: {', '.join(a)}" for n, a in sorted(elsewhere.items())) or "nowhere"
    slurm = f"; Slurm's NodeAddr for {name} is {found['slurm_addr']}" if found.get("slurm_addr") else ""
    return failed(
        f"MASTER_ADDR {name!r} does not resolve on {', '.join(nodes)} ({found['resolve_error']}); "
        f"it resolves {seen}{slurm}",
        f"add {name} to {', '.join(nodes)}'s /etc/hosts or DNS (`getent hosts {name}` must answer there), "
        f"or set MASTER_ADDR to an address every node reaches",
        measured={"name": name, "unresolved_on": nodes, "resolved": elsewhere},
        fault_class=FaultClass.NODE,
        code=UNRESOLVED,
    )


def _interfaces(arrivals: Mapping[int, Mapping[str, Any]]) -> Result | None:
    bad = {(str(f["node"]), p["var"]): p for f in arrivals.values() for p in f.get("interfaces", [])}
    if not bad:
        return None
    (node, var), first = next(iter(bad.items()))
    named = "; ".join(f"on {n}: {p['text']}" for (n, _), p in bad.items())
    return failed(
        f"{var}={first['value']} names no usable interface on {', '.join(sorted({n for n, _ in bad}))}: "
        f"{named}",
        f"on {node}: {first['fix']}",
        measured={"problems": list(bad.values())},
        fault_class=FaultClass.CONFIG,
        code=INTERFACE,
    )


def _versions(arrivals: Mapping[int, Mapping[str, Any]]) -> Result | None:
    differ = {}
    for key in VERSION_KEYS:
        groups = _by_value(arrivals, lambda f, k=key: f["versions"].get(k))
        if len(groups) > 1:
            differ[key] = groups
    if not differ:
        return None
    text = "; ".join(
        f"{key} " + ", ".join(f"{v} on {', '.join(nodes)}" for v, nodes in groups.items())
        for key, groups in differ.items()
    )
    return failed(
        f"versions differ across nodes: {text}",
        "run every node from the same image or environment (same torch, NCCL and envcheck); "
        "`python -m envcheck facts` on each node shows which one drifted",
        measured={"differ": differ},
        fault_class=FaultClass.CONFIG,
        code=VERSIONS,
    )


def _clock(
    arrivals: Mapping[int, Mapping[str, Any]], seen_at: Mapping[int, float], master: Mapping[str, Any]
) -> Result | None:
    skews = {str(f["node"]): float(f["time"]) - seen_at[r] for r, f in arrivals.items() if r in seen_at}
    node, skew = max(skews.items(), key=lambda kv: abs(kv[1]), default=("", 0.0))
    if abs(skew) < SKEW_WARN_S:
        return None
    text = (
        f"{node}'s clock is {abs(skew):.1f}s {'ahead of' if skew > 0 else 'behind'} {master['node']}'s "
        f"(rank 0): torch elastic's rendezvous drops a node whose heartbeat looks {SKEW_FAIL_S:g}s old"
    )
    fix = f"sync {node}'s clock (chronyc tracking / timedatectl show on {node}) before a multi-node run"
    measured = {"skew_s": {n: round(s, 3) for n, s in skews.items()}}
    if abs(skew) >= SKEW_FAIL_S:
        return failed(text, fix, measured=measured, fault_class=FaultClass.NODE, code=CLOCK_SKEW)
    return warned(text, fix, measured=measured, fault_class=FaultClass.NODE, code=CLOCK_SKEW)


def judge_roll_call(
    world: int,
    arrivals: Mapping[int, Mapping[str, Any]],
    master: Mapping[str, Any],
    layout: list[str] | None,
    waited_s: float,
    seen_at: Mapping[int, float],
) -> Result | None:
    """One dist.rendezvous result naming every cause found, most basic first (None when the roll call is clean)."""
    found = [
        r
        for r in (
            _missing(world, arrivals, master, layout, waited_s),
            _unresolved(arrivals, master),
            _interfaces(arrivals),
            _versions(arrivals),
            _clock(arrivals, seen_at, master),
        )
        if r
    ]
    if not found:
        return None
    return (found[0] if len(found) == 1 else combine(found)).named(NAME, waited_s)
