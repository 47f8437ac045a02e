"""The gate before the collectives: join the store, take the roll call, and stop with a report on a cross-node fault.

Rank 0 reports every stop itself (`dist.rendezvous`), within the run's `--timeout`: the port it must host is taken,
or the roll call found a rank missing, a name that does not resolve, a bad interface variable, drifted versions or
a skewed clock. A rank that cannot reach the store prints one line naming why and exits 1 (no traceback).
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from envcheck.collectives.crossnode import NAME, PORT_TAKEN, judge_roll_call
from envcheck.collectives.rendezvous import port_holder
from envcheck.collectives.rollcall import Unreachable, hear, join, say
from envcheck.core.result import FaultClass, Result, Status, failed

Report = Callable[[list[Result]], None]


@dataclass
class Gate:
    """Past the gate: the store to go on with (None: stop with `code`), and warnings to add to the report."""

    store: Any
    code: int = 0
    warnings: list[Result] = field(default_factory=list)


def port_taken(port: int, exc: BaseException, took: float) -> Result:
    """FAIL: rank 0 could not host the store on MASTER_PORT."""
    holder = port_holder(port)
    node = socket.gethostname()
    first = str(exc).splitlines()[0][:300]
    by = f" (held by {holder})" if holder else ""
    return failed(
        f"the rendezvous port {port} on {node} is taken{by}: rank 0 could not host the store ({first})",
        f"free port {port} on {node}, or set MASTER_PORT to a free port (under srun the default is derived "
        "from the job id)",
        measured={"port": port, "node": node, "holder": holder},
        fault_class=FaultClass.CONFIG,
        code=PORT_TAKEN,
    ).named(NAME, took)


def enter(rank: int, world: int, timeout_s: float, report: Report) -> Gate:
    """Join and take the roll call; on a stop, rank 0 has already reported and the caller exits with `code`."""
    began = time.monotonic()
    try:
        joined = join(rank, world, timeout_s)
    except Unreachable as exc:
        text = "".join(ch if ch.isprintable() else "?" for ch in str(exc))
        print(f"envcheck.distributed: error: {text}", file=sys.stderr, flush=True)
        return Gate(store=None, code=1)
    except (RuntimeError, OSError) as exc:
        if rank != 0:
            raise
        report([port_taken(int(os.environ.get("MASTER_PORT", "29500")), exc, time.monotonic() - began)])
        return Gate(store=None, code=1)
    if rank != 0:
        code = hear(joined.store, timeout_s)
        return Gate(store=joined.store) if code is None else Gate(store=None, code=code)
    verdict = judge_roll_call(
        world, joined.arrivals, joined.master, joined.layout, joined.waited_s, joined.seen_at
    )
    if verdict is None or verdict.status is Status.WARN:
        say(joined.store, go=True)
        return Gate(store=joined.store, warnings=[verdict] if verdict else [])
    try:
        report([verdict])
    finally:
        say(joined.store, go=False, code=1)
    time.sleep(1.0)  # rank 0 hosts the store (srun): let the others read the word before it closes
    return Gate(store=None, code=1, warnings=[])
