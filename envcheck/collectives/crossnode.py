"""The roll call's verdict (`dist.rendezvous`): pure functions of what each rank saw alone (its look), how it reached
the store, and Slurm's view of the ranks that never did (envcheck.collectives.absent).

Causes, most basic first, each only from its own evidence: a rank that never arrived (its node, and what Slurm shows
there: no task, a task still running something else, envcheck stuck before the store), the store's port held on
rank 0's node (by which process) or filtered by a firewall (which node, which port), MASTER_ADDR that does not
resolve on some nodes (or resolves there to a stale address), MASTER_ADDR that names a host other than rank 0's
node; then the variables, versions and clocks of the nodes (envcheck.collectives.crossnode_env). The first two
are in envcheck.collectives.crossnode_reach.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from envcheck.collectives.crossnode_codes import (
    CLOCK_SKEW,
    INTERFACE,
    MASTER_ELSEWHERE,
    MISSING_RANK,
    NAME,
    PORT_BLOCKED,
    PORT_TAKEN,
    UNRESOLVED,
    VERSIONS,
)
from envcheck.collectives.crossnode_env import (
    SKEW_FAIL_S,
    SKEW_WARN_S,
    clock_result,
    interface_result,
    versions_result,
)
from envcheck.collectives.crossnode_reach import blocked_result, missing_result, ranks_text, store_of
from envcheck.collectives.look import plain
from envcheck.core.result import FaultClass, Result, Status, failed, warned
from envcheck.probe import port_owner

__all__ = [
    "CLOCK_SKEW",
    "INTERFACE",
    "MASTER_ELSEWHERE",
    "MISSING_RANK",
    "NAME",
    "PORT_BLOCKED",
    "PORT_TAKEN",
    "UNRESOLVED",
    "VERSIONS",
    "judge_roll_call",
    "port_result",
    "SKEW_FAIL_S",
    "SKEW_WARN_S",
]
Arrivals = Mapping[int, Mapping[str, Any]]


def port_result(master: Mapping[str, Any]) -> Result | None:
    """Rank 0's port, held (by whom) or filtered even from its own node: it cannot host the store."""
    state = master.get("port_state") or {}
    node, port = master["node"], master["port"]
    if state.get("state") == "held":
        holders = [port_owner.Holder(**h) for h in state.get("holders", [])]
        by = port_owner.describe(holders) or "a process this user cannot see"
        pids = [h.pid for h in holders if h.pid]
        return failed(
            f"the rendezvous port {port} on {node} is already held by {by}: rank 0 cannot host the store there",
            f"stop it ({f'kill {pids[0]}' if pids else f'ss -ltnp sport = :{port} on {node}'}) if it is a leftover "
            f"of an earlier run, or set MASTER_PORT to a free port (under srun the default is derived from the job id)",
            measured={"port": port, "node": node, "holders": state.get("holders", [])},
            fault_class=FaultClass.CONFIG,
            code=PORT_TAKEN,
        )
    if state.get("state") == "blocked":
        return failed(
            f"port {port} on {node} accepts no connection even from {node} itself ({state['target']}:{port}: "
            f"{state['why']}): a firewall on {node} filters the rendezvous port",
            f"on {node}: allow TCP {port} (`iptables -S` / `nft list ruleset` shows the rule), or set MASTER_PORT to "
            "a port the firewall lets through",
            measured={"port": port, "node": node, "blocked": state},
            fault_class=FaultClass.NODE,
            code=PORT_BLOCKED,
        )
    return None


def _unresolved(arrivals: Arrivals, master: Mapping[str, Any]) -> Result | None:
    looks = {str(master["node"]): master, **{str(f["node"]): f.get("look") or {} for f in arrivals.values()}}
    lost = {n: lk for n, lk in looks.items() if lk.get("name") and not lk.get("addresses")}
    stale = {
        str(f["node"]): f["reach"]["addresses"]
        for f in arrivals.values()
        if f.get("reach")
        and f["reach"].get("via_fallback")
        and f["reach"]["addresses"]
        and master.get("local")
        and not {plain(a) for a in f["reach"]["addresses"]} & set(master.get("own", []))
    }
    if not lost and not stale:
        return None
    name = master["name"]
    elsewhere = {n: lk["addresses"] for n, lk in looks.items() if lk.get("addresses") and n not in stale}
    seen = "; ".join(f"on {n}: {', '.join(a)}" for n, a in sorted(elsewhere.items())) or "on no node"
    parts = []
    if lost:
        errors = sorted({str(lk.get("resolve_error")) for lk in lost.values()})
        parts.append(f"does not resolve on {', '.join(sorted(lost))} ({'; '.join(errors)})")
    if stale:
        parts.append(
            "resolves to a stale address on "
            + ", ".join(f"{n} ({', '.join(a)})" for n, a in sorted(stale.items()))
            + f", not to {master['node']}, where rank 0 runs ({', '.join(master.get('own', []))})"
        )
    nodes = sorted({*lost, *stale})
    rank0 = " (rank 0's node)" if master["node"] in lost else ""
    return failed(
        f"MASTER_ADDR {name!r} {' and '.join(parts)}{rank0}; it resolves {seen}",
        f"fix {name}'s entry in {', '.join(nodes)}'s /etc/hosts or DNS (`getent hosts {name}` there must give "
        f"{master['node']}'s address), or set MASTER_ADDR to an address every node reaches",
        measured={
            "name": name,
            "nodes": nodes,
            "unresolved_on": sorted(lost),
            "stale": stale,
            "resolved": elsewhere,
        },
        fault_class=FaultClass.NODE,
        code=UNRESOLVED,
    )


def _elsewhere(arrivals: Arrivals, master: Mapping[str, Any]) -> Result | None:
    looks = [master, *(f.get("look") or {} for f in arrivals.values())]
    said = [lk for lk in looks if (lk.get("problem") or {}).get("code") == MASTER_ELSEWHERE]
    if not said:
        return None
    name, node = master["name"], master["node"]
    itself = sorted({str(lk["node"]) for lk in said if lk.get("node") != node})
    points = f" ({', '.join(itself)} itself)" if itself else ""
    addrs = list(
        dict.fromkeys(
            plain(a)
            for a in master.get("addresses")
            or next((lk["addresses"] for lk in said if lk.get("addresses")), [])
        )
    )
    return failed(
        f"MASTER_ADDR {name!r} resolves to {', '.join(addrs)}{points}, not to {node}, where rank 0 runs: no rank "
        f"can host the rendezvous store at {store_of(master)}",
        f"set MASTER_ADDR to rank 0's node ({node}: under srun, the first of `scontrol show hostnames "
        "$SLURM_JOB_NODELIST`), or leave it unset under srun (envcheck then takes the step's first node)",
        measured={"name": name, "addresses": addrs, "rank0_node": node, "nodes": [node, *itself]},
        fault_class=FaultClass.CONFIG,
        code=MASTER_ELSEWHERE,
    )


def combine_causes(found: list[Result]) -> Result:
    """One result naming every cause: failures first (the first one's code, class and fix), then warnings."""
    if len(found) == 1:
        return found[0]
    bad = [r for r in found if r.status is Status.FAIL] or found
    measured = {k: v for r in found for k, v in r.measured.items()}
    measured["causes"] = [r.code for r in found]
    make = failed if bad[0].status is Status.FAIL else warned
    return make(
        "; ".join(r.summary for r in [*bad, *(r for r in found if r not in bad)]),
        "; ".join(dict.fromkeys(r.remediation or "" for r in bad if r.remediation)),
        measured=measured,
        fault_class=bad[0].fault_class,
        code=bad[0].code,
    )


def judge_roll_call(
    world: int,
    arrivals: Arrivals,
    master: Mapping[str, Any],
    layout: list[str] | None,
    waited_s: float,
    seen_at: Mapping[int, float],
    views: Mapping[str, Mapping[str, Any]] | None = None,
    timeout_s: float | None = None,
    cut_short: bool = False,
) -> Result | None:
    """One dist.rendezvous result naming every cause found, most basic first (None when the roll call is clean)."""
    views = views or {}
    timeout = timeout_s if timeout_s is not None else waited_s
    blocked = blocked_result(arrivals, master, views)
    cut = set(blocked.measured["from_nodes"] if blocked else [])
    missing = missing_result(
        world,
        arrivals,
        master,
        layout,
        {n: v for n, v in views.items() if n not in cut},
        timeout,
        waited_s,
        cut_short,
    )
    if blocked and missing and set(missing.measured["nodes"]) <= cut:  # the filter is why they never arrived
        ranks = ranks_text(missing.measured["missing_ranks"], arrivals, layout)
        blocked = replace(
            blocked,
            summary=f"{ranks} never reached the rendezvous store: {blocked.summary}",
            measured={**blocked.measured, "missing_ranks": missing.measured["missing_ranks"]},
        )
        missing = None
    found = [
        r
        for r in (
            port_result(master),
            blocked,
            missing,
            _unresolved(arrivals, master),
            _elsewhere(arrivals, master),
            interface_result(arrivals),
            versions_result(arrivals),
            clock_result(arrivals, seen_at, master),
        )
        if r
    ]
    if not found:
        return None
    return combine_causes(found).named(NAME, waited_s)
