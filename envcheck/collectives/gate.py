"""The gate before the collectives: look, join the store, take the roll call, probe the transport, and stop with a
report on a cross-node fault.

1. Every rank looks alone (envcheck.collectives.look) and prints the cause it sees in one line.
2. Rank 0 stops at once when its port is held or filtered; otherwise it hosts the store and the others reach it.
3. The roll call (envcheck.collectives.rollcall): rank 0 gathers every arrival, asks Slurm about the missing ranks,
   judges (`dist.rendezvous`) and says go, probe or stop.
4. With ranks on two nodes or more, the first rank of each node probes the connections the backend will open
   (envcheck.collectives.transport_probe); rank 0 judges them (`dist.transport`) and says go or stop.
A rank that cannot reach the store prints one line naming why and exits 1 (no traceback), after rank 0 has had the
time to report (under `srun -K`, its exit would stop rank 0 before it wrote anything).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from envcheck.collectives import absent
from envcheck.collectives.crossnode import judge_roll_call, port_result
from envcheck.collectives.crossnode_codes import NAME
from envcheck.collectives.look import Look, look_here, srun_direct
from envcheck.collectives.rollcall import (
    REACH_TIMEOUTS,
    WORD,
    WORD_MARGIN_S,
    Joined,
    Unreachable,
    collect,
    hear,
    host,
    publish,
    reach,
    say,
    say_line,
)
from envcheck.collectives.transport import is_loopback
from envcheck.collectives.transport_probe import ROUND_S, gather, probers, run_round
from envcheck.collectives.transport_verdict import judge_transport
from envcheck.core.result import FaultClass, Result, Status, failed
from envcheck.probe.slurm_layout import rank_nodes

Report = Callable[[list[Result]], None]
TRANSPORT_WORD = "envcheck/transport"
WORD_READ_S = 1.0  # rank 0 hosts the store (srun): it lets the others read the word before it closes


@dataclass
class Gate:
    """Past the gate: the store to go on with (None: stop with `code`), and results to add to the report."""

    store: Any
    code: int = 0
    warnings: list[Result] = field(default_factory=list)
    clean: bool = True  # False: a thread is stuck in a c10d call, so the process must leave with os._exit


def _could_not_host(look: Look, exc: BaseException, took: float) -> Result:
    """rank 0's c10d server failed after the look found the port free: held since (a race), or another error."""
    text = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
    if "EADDRINUSE" in text or "Address already in use" in text:
        again = port_result({**look.as_dict(), "port_state": {"state": "held", "holders": []}})
        if again is not None:
            return again.named(NAME, took)
    return failed(
        f"rank 0 on {look.node} could not host the rendezvous store on port {look.port}: {text}",
        f"on {look.node}: `ss -ltnp sport = :{look.port}`; set MASTER_PORT to a free port",
        measured={"port": look.port, "node": look.node, "error": text},
        fault_class=FaultClass.NODE,
    ).named(NAME, took)


def _to(look: Look) -> list[str]:
    """Addresses of rank 0's node that the other nodes should reach."""
    named = [a for a in look.addresses if not is_loopback(a)] if look.local else []
    return list(dict.fromkeys([*named, *([look.rank0_addr] if look.rank0_addr else [])]))[:3]


def _stop(store: Any, key: str, report: Report, result: Result) -> Gate:
    try:
        report([result])
    finally:
        store.set(key, "stop:1")
    time.sleep(WORD_READ_S)
    return Gate(store=None, code=1)


def _word(text: str | None) -> tuple[str, Any]:
    if text is None:
        return "stop", 1
    kind, _, rest = text.partition(":")
    if kind == "probe":
        return kind, json.loads(rest)
    return kind, int(rest or 1) if kind == "stop" else None


def enter(rank: int, world: int, timeout_s: float, report: Report, backend: str = "gloo") -> Gate:
    """Look, join and take the roll call; on a stop, rank 0 has already reported and the caller exits with `code`."""
    began = time.monotonic()
    hosting = rank == 0 and os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True"
    look = look_here(rank, backend, hosting)
    said = say_line(look)
    if look.problem:
        said(look.problem["text"])
    if hosting:
        stop = port_result(look.as_dict())
        if stop is not None:
            report([stop.named(NAME, time.monotonic() - began)])
            return Gate(store=None, code=1)
        try:
            store, found = host(look, world, timeout_s), None
        except (RuntimeError, OSError) as exc:
            report([_could_not_host(look, exc, time.monotonic() - began)])
            return Gate(store=None, code=1)
    else:
        try:
            store, found = reach(look, world, timeout_s, said)
        except Unreachable as exc:
            said(str(exc).partition(": ")[2] or str(exc))
            time.sleep(max(0.0, began + REACH_TIMEOUTS * timeout_s + WORD_MARGIN_S - time.monotonic()))
            return Gate(store=None, code=1, clean=not exc.stuck)
    publish(store, look, found)
    if rank != 0:
        return _follow(store, rank, look, timeout_s, backend)
    joined = Joined(
        store=store, master=look.as_dict(), layout=rank_nodes(os.environ) if srun_direct(os.environ) else None
    )
    where = (look.name, look.port, _to(look))
    collect(
        joined,
        world,
        time.monotonic(),
        timeout_s,
        cause_known=look.problem is not None,
        ask_slurm=lambda missing: absent.views(missing, joined.layout or [], where, os.environ),
        conclusive=lambda views, missing: absent.conclusive(views, missing, joined.layout or []),
    )
    verdict = judge_roll_call(
        world,
        joined.arrivals,
        joined.master,
        joined.layout,
        joined.waited_s,
        joined.seen_at,
        joined.views,
        timeout_s,
        joined.cut_short,
    )
    if verdict is not None and verdict.status is Status.FAIL:
        return _stop(store, WORD, report, verdict)
    extra = [verdict] if verdict else []
    ranks = probers(joined.arrivals)
    if len(ranks) < 2:
        say(store, "go")
        return Gate(store=store, warnings=extra)
    say(store, "probe:" + json.dumps(ranks))
    probed = time.monotonic()
    listener = run_round(store, 0, look.node, look.transport, ranks, backend)
    at, results = gather(store, ranks)
    checked = judge_transport(
        joined.arrivals, at, results, backend, f"{look.name}:{look.port}", time.monotonic() - probed
    )
    if listener is not None:
        listener.close()
    if checked.status is Status.FAIL:
        return _stop(store, TRANSPORT_WORD, report, checked)
    store.set(TRANSPORT_WORD, "go")
    return Gate(store=store, warnings=[*extra, checked])


def _follow(store: Any, rank: int, look: Look, timeout_s: float, backend: str) -> Gate:
    """A rank other than 0: wait for rank 0's word, take part in the transport probe when asked."""
    kind, value = _word(hear(store, timeout_s + absent.REMOTE_S))  # rank 0 may ask Slurm before it speaks
    if kind == "stop":
        return Gate(store=None, code=value)
    if kind == "probe":
        listener = (
            run_round(store, rank, look.node, look.transport, value, backend) if rank in value else None
        )
        kind, value = _word(hear(store, ROUND_S, TRANSPORT_WORD))
        if listener is not None:
            listener.close()
        if kind == "stop":
            return Gate(store=None, code=value)
    return Gate(store=store)
