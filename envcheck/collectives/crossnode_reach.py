"""The roll call's verdicts on the ranks that did not reach the store the plain way: those that never arrived
(their node, and what Slurm's look shows there: no task, a task still running something else, envcheck stuck
before the store) and the nodes that cannot connect to the port rank 0 serves (a firewall: which node, which
port). Pure functions of the arrivals and Slurm's views (envcheck.collectives.absent)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envcheck.collectives.crossnode_codes import MISSING_RANK, PORT_BLOCKED
from envcheck.collectives.look import plain
from envcheck.core.result import FaultClass, Result, failed

Arrivals = Mapping[int, Mapping[str, Any]]
LISTED = 8


def node_of(rank: int, arrivals: Arrivals, layout: list[str] | None) -> str:
    """The node a rank ran on: its arrival's, else Slurm's step layout."""
    if rank in arrivals:
        return str(arrivals[rank]["node"])
    return layout[rank] if layout and rank < len(layout) else "an unknown node (not an srun step)"


def store_of(master: Mapping[str, Any]) -> str:
    return f"{master['name']}:{master['port']}"


def ranks_text(ranks: list[int], arrivals: Arrivals, layout: list[str] | None) -> str:
    """`rank 2 (on n3), rank 3 (on n3)` (the first LISTED, and how many more)."""
    named = ", ".join(f"rank {r} (on {node_of(r, arrivals, layout)})" for r in ranks[:LISTED])
    return named + (f" and {len(ranks) - LISTED} more" if len(ranks) > LISTED else "")


def _task_words(view: Mapping[str, Any], rank: int, timeout_s: float) -> tuple[str, str]:
    """(what Slurm's look saw of `rank` on its node, the fix)."""
    node = view["node"]
    tasks = [t for t in view["view"]["tasks"] if t["rank"] == rank]
    if not tasks:
        return (
            f"Slurm's look on {node} finds no process of rank {rank} in this step: its task ended before it "
            "reached the store",
            f"rank {rank}'s own output says why it ended (`srun -l` labels each line with its rank; its exit code is "
            "in srun's `task N: Exited` line)",
        )
    leaf = next((t for t in tasks if t["leaf"]), tasks[-1])
    if leaf["envcheck"]:
        where = {True: "past importing torch", False: "still importing torch (libtorch not mapped yet)"}.get(
            leaf.get("torch_loaded"), "before the store"
        )
        return (
            f"envcheck runs there (pid {leaf['pid']}, task started {leaf['age_s']:g}s ago, state {leaf['state']}), "
            f"{where}, and {node} reaches the store: it started late or is stuck before the store",
            f"on {node}: `py-spy dump --pid {leaf['pid']}` shows where; a slow or hung file system (torch on NFS) "
            "is the usual cause",
        )
    return (
        f"its task is running `{leaf['command']}` (pid {leaf['pid']}, for {leaf['age_s']:g}s): envcheck had not "
        f"started there within --timeout {timeout_s:g}s",
        f"what runs before envcheck in rank {rank}'s task on {node} (a wrapper, a prolog, a container pull) delays "
        "it: start envcheck first, or raise --timeout",
    )


def _gone(view: Mapping[str, Any] | None, rank: int) -> bool:
    seen = (view or {}).get("view")
    return seen is not None and not any(t["rank"] == rank for t in seen["tasks"])


def missing_result(
    world: int,
    arrivals: Arrivals,
    master: Mapping[str, Any],
    layout: list[str] | None,
    views: Mapping[str, Mapping[str, Any]],
    timeout_s: float,
    waited_s: float,
    cut_short: bool = False,
) -> Result | None:
    """The ranks that never arrived. When rank 0 stopped before its deadline (another cause was known), only a rank
    whose task Slurm shows gone is claimed: the others may still have been starting."""
    missing = [r for r in range(world) if r not in arrivals]
    if cut_short:
        missing = [r for r in missing if _gone(views.get(node_of(r, arrivals, layout)), r)]
    if not missing:
        return None
    first, node = missing[0], node_of(missing[0], arrivals, layout)
    view = views.get(node)
    seen = (
        f"; {master['name']} resolves to {', '.join(master['addresses'])} on {master['node']}"
        if master.get("addresses")
        else ""
    )
    fix = (
        f"that rank's own line in the job's output says why; on {node}: `getent hosts {master['name']}` and "
        f"`python -c 'import socket; socket.create_connection((\"{master['name']}\", {master['port']}), 5)'`"
    )
    said = seen
    if view and view.get("view"):
        said, fix = _task_words(view, first, timeout_s)
        said = f": {said}"
    elif view:
        state = view.get("state") or {}
        where = ", ".join(f"{k}={state[k]}" for k in ("State", "Reason") if state.get(k))
        said = (
            f": Slurm could not look on {node} ({view.get('error')}){f'; scontrol: {where}' if where else ''}"
        )
    return failed(
        f"{ranks_text(missing, arrivals, layout)} never reached the rendezvous store {store_of(master)} (rank 0 waited "
        f"{waited_s:.0f}s of --timeout {timeout_s:g}s){said}",
        fix,
        measured={
            "missing_ranks": missing,
            "nodes": sorted({node_of(r, arrivals, layout) for r in missing}),
            "arrived": len(arrivals),
            "world_size": world,
            "store": store_of(master),
            "slurm_views": dict(views),
        },
        fault_class=FaultClass.NODE,
        code=MISSING_RANK,
    )


def blocked_result(
    arrivals: Arrivals, master: Mapping[str, Any], views: Mapping[str, Mapping[str, Any]]
) -> Result | None:
    """A node that cannot connect to the port rank 0 serves, at an address of rank 0's node."""
    own = set(master.get("own", []))
    cut: dict[str, dict[str, Any]] = {}
    for node, view in views.items():
        connect = (view.get("view") or {}).get("connect") or {}
        if connect and all(connect.values()):
            cut[node] = {"connect": connect, "witness": view["view"].get("witness", {})}
    for f in arrivals.values():
        reach = f.get("reach") or {}
        failed_here = {
            a: why
            for a, why in reach.get("tried", {}).items()
            if plain(a) in own and plain(a) != plain(str(reach.get("address")))
        }
        if reach.get("via_fallback") and failed_here and f["node"] not in cut:
            cut[str(f["node"])] = {"connect": failed_here, "witness": {}, "reached": reach.get("address")}
    if not cut:
        return None
    port, node = master["port"], master["node"]
    words = []
    for where, seen in sorted(cut.items()):
        tried = "; ".join(f"{a}:{port}: {why}" for a, why in seen["connect"].items() if why)
        answers = [a for a, why in (seen["witness"].get("errors") or {}).items() if why is None]
        slurmd = f"; {answers[0]} answers on slurmd's port {seen['witness']['port']}" if answers else ""
        words.append(f"from {where}: {tried}{slurmd}")
    return failed(
        f"{', '.join(sorted(cut))} cannot connect to the rendezvous port {port} on {node} while rank 0 listens "
        f"there ({'; '.join(words)}): a firewall on {node} (or on the way out of {', '.join(sorted(cut))}) filters "
        f"port {port}",
        f"allow TCP {port} (MASTER_PORT) into {node} from the job's nodes (`iptables -S` / `nft list ruleset` on "
        f"{node} shows the rule), or set MASTER_PORT to a port the firewall lets through",
        measured={"port": port, "node": node, "from_nodes": sorted(cut), "seen": cut},
        fault_class=FaultClass.NODE,
        code=PORT_BLOCKED,
    )
