"""Join the store and answer a roll call before any collective: who arrived, from where, with what.

Each rank first looks alone (envcheck.collectives.look). Rank 0 hosts the store (its c10d client connects over
loopback when MASTER_ADDR is not this node, so a wrong name cannot make it wait out its own timeout); the others
reach it (envcheck.collectives.rendezvous), through Slurm's address of rank 0's node when the name fails them, and
publish their arrival: the look, how they reached the store, versions, and their wall clock. Rank 0 waits for every
arrival within `--timeout`, but only a few seconds more once a cause is known, and asks Slurm about the ranks still
missing (envcheck.collectives.absent); then it judges (envcheck.collectives.crossnode) and publishes go or stop.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from envcheck.collectives import absent
from envcheck.collectives.look import Look
from envcheck.collectives.rendezvous import Reach, reach_store, slurm_node_addr

ARRIVE, WORD = "envcheck/arrive/", "envcheck/rollcall"
WORD_MARGIN_S = 10.0  # the others wait this long beyond rank 0's roll call for its word
HANDSHAKE_S = 5.0  # a listener that accepts but answers no c10d handshake within this is not a store
REACH_TIMEOUTS = 2  # a rank waits this many --timeout for rank 0's store to answer at all
GATHER_S = 5.0  # once a cause is known, how much longer rank 0 waits for the others' findings
EARLY_S = 5.0  # when rank 0 first asks Slurm about the ranks still missing


class Unreachable(Exception):
    """This rank cannot reach the store (or its port holds no c10d store): the message names why. `stuck` says a
    c10d client is left blocked in a thread (the process must leave with os._exit)."""

    def __init__(self, message: str, stuck: bool = False) -> None:
        super().__init__(message)
        self.stuck = stuck


@dataclass
class Joined:
    """A rank's way into the run: the store, and (rank 0) the arrivals it collected."""

    store: Any
    arrivals: dict[int, dict[str, Any]] = field(default_factory=dict)
    master: dict[str, Any] = field(default_factory=dict)  # rank 0's own look
    layout: list[str] | None = None
    waited_s: float = 0.0
    seen_at: dict[int, float] = field(default_factory=dict)  # rank 0's wall clock when each arrival appeared
    views: dict[str, dict[str, Any]] = field(default_factory=dict)  # Slurm's view of the missing ranks' nodes
    cut_short: bool = False  # rank 0 stopped before its deadline because a cause was already known


def versions() -> dict[str, str | None]:
    """torch, NCCL (when CUDA is there), envcheck and Python versions of this process."""
    import torch

    import envcheck

    nccl = None
    try:
        if torch.cuda.is_available():
            nccl = ".".join(str(v) for v in torch.cuda.nccl.version())
    except (RuntimeError, AttributeError):
        nccl = None
    return {
        "torch": str(torch.__version__),
        "nccl": nccl,
        "envcheck": envcheck.__version__,
        "python": platform.python_version(),
    }


def arrival(look: Look, reach: Reach | None) -> dict[str, Any]:
    """What this rank tells rank 0 on arrival."""
    return {
        "rank": look.rank,
        "node": look.node,
        "versions": versions(),
        "look": look.as_dict(),
        "reach": reach.as_dict() if reach else None,
        "time": time.time(),
    }


def say_line(look: Look) -> Callable[[str], None]:
    """Print one line as this rank (stderr), once."""
    said: list[str] = []

    def say(text: str) -> None:
        if not said:
            said.append(text)
            clean = "".join(ch if ch.isprintable() else "?" for ch in text)
            print(
                f"envcheck.distributed: rank {look.rank} on {look.node}: {clean}", file=sys.stderr, flush=True
            )

    return say


def host(look: Look, world: int, timeout_s: float) -> Any:
    """Rank 0's store on MASTER_PORT (all addresses, as c10d's server binds); OSError/RuntimeError go to the caller."""
    import torch.distributed as dist

    return dist.TCPStore(
        look.name if look.local else "127.0.0.1",
        look.port,
        world,
        is_master=True,
        timeout=timedelta(seconds=timeout_s),
        wait_for_workers=False,
    )


def reach(look: Look, world: int, timeout_s: float, said: Callable[[str], None]) -> tuple[Any, Reach]:
    """Reach rank 0's store as a client, or raise Unreachable naming why (`said` prints this rank's one line)."""
    import torch.distributed as dist

    began = time.monotonic()
    fallback = "127.0.0.1" if look.rank0_node == look.node else look.rank0_addr
    if fallback is None and not look.addresses:
        fallback = slurm_node_addr(look.name)  # the name may be a Slurm node whose NodeAddr answers
    # Rank 0 opens the store only once its own start (importing torch) is over, then waits --timeout for arrivals:
    # wait for it up to twice the timeout, so that a slow start of rank 0 is not taken for its absence.
    budget = REACH_TIMEOUTS * timeout_s
    found = reach_store(look.name, look.port, budget, (look.addresses, look.resolve_error), fallback, said)
    if found.address is None:
        refused_only = found.tried and all(
            why.startswith("connection refused") for why in found.tried.values()
        )
        late = absent.started_late(os.environ, timeout_s) if refused_only else None
        raise Unreachable(f"rank {look.rank} on {found.node}: {late or found.problem}")
    budget = max(1.0, min(HANDSHAKE_S, REACH_TIMEOUTS * timeout_s - (time.monotonic() - began)))
    box: dict[str, Any] = {}

    def connect() -> None:  # c10d's client pings after connecting and waits for the answer without a timeout
        try:
            box["store"] = dist.TCPStore(
                found.address, look.port, world, is_master=False, timeout=timedelta(seconds=budget)
            )
        except (RuntimeError, OSError) as exc:  # DistNetworkError/DistStoreError are RuntimeErrors
            box["error"] = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__

    thread = threading.Thread(target=connect, name="envcheck-store-client", daemon=True)
    thread.start()
    thread.join(budget + 1.0)
    if "store" not in box:
        why = box.get("error") or "it accepted the connection and never answered"
        raise Unreachable(
            f"rank {look.rank} on {found.node}: {look.name}:{look.port} ({found.address}) accepts connections but "
            f"no c10d store answered there within {budget:g}s ({why}); another service holds the port",
            stuck=thread.is_alive(),
        )
    store = box["store"]
    store.set_timeout(timedelta(seconds=timeout_s))
    return store, found


def publish(store: Any, look: Look, found: Reach | None) -> None:
    store.set(f"{ARRIVE}{look.rank}", json.dumps(arrival(look, found)))


def has_cause(found: dict[str, Any]) -> bool:
    """An arrival that already names a cause (its own line, or a way in other than MASTER_ADDR)."""
    reach_seen = found.get("reach") or {}
    return bool((found.get("look") or {}).get("problem") or reach_seen.get("via_fallback"))


def collect(
    joined: Joined,
    world: int,
    began: float,
    timeout_s: float,
    cause_known: bool,
    ask_slurm: Callable[[list[int]], dict[str, dict[str, Any]]],
    conclusive: Callable[[dict[str, dict[str, Any]], list[int]], bool],
) -> None:
    """Rank 0 waits for every arrival until `--timeout`, GATHER_S after a cause is known, or until Slurm's view of
    the missing ranks settles the cause; it then asks Slurm about any rank still missing."""
    store = joined.store
    deadline, early = began + timeout_s, began + min(EARLY_S, timeout_s / 2)
    cause_at = time.monotonic() if cause_known else None
    waiting, asked = list(range(world)), False
    while waiting:
        for r in list(waiting):  # first sight of each arrival, on rank 0's clock: the other clock's skew
            if store.check([f"{ARRIVE}{r}"]):
                joined.seen_at[r] = time.time()
                joined.arrivals[r] = json.loads(store.get(f"{ARRIVE}{r}"))
                waiting.remove(r)
                if cause_at is None and has_cause(joined.arrivals[r]):
                    cause_at = time.monotonic()
        now = time.monotonic()
        if not waiting or now >= deadline:
            break
        if cause_at is not None and now >= cause_at + GATHER_S:
            joined.cut_short = True
            break
        if not asked and now >= early and joined.layout:
            asked = True
            joined.views = ask_slurm(waiting)
            if conclusive(joined.views, waiting):
                break
            continue
        time.sleep(0.05)
    missing = [r for r in range(world) if r not in joined.arrivals]
    if missing and joined.layout and not (joined.views and conclusive(joined.views, missing)):
        joined.views = ask_slurm(missing)  # the final view, at the deadline
    joined.waited_s = time.monotonic() - began


def say(store: Any, word: str) -> None:
    """Rank 0's word after a stage: `go`, `probe:...` or `stop:CODE`."""
    store.set(WORD, word)


def hear(store: Any, timeout_s: float, key: str = WORD) -> str | None:
    """The others: rank 0's word (None when it never spoke within the timeout and the margin)."""
    try:
        store.wait([key], timedelta(seconds=timeout_s + WORD_MARGIN_S))
        return str(store.get(key).decode())
    except (RuntimeError, OSError):
        return None
