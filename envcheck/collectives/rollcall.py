"""Join the store and answer a roll call before any collective: who arrived, from where, with what.

Every rank reaches the store (envcheck.collectives.rendezvous), then publishes its arrival: node, how it
reached MASTER_ADDR, its torch/NCCL/envcheck/Python versions, its socket-interface variables judged against its
own interfaces, and its wall clock. Rank 0 waits for all arrivals within the run's `--timeout`, judges them
(envcheck.collectives.crossnode) and publishes go or stop; the others wait for that word. So a cross-node
failure is named by rank 0's report within the timeout, before gloo or NCCL can hang on it. A rank that cannot
reach the store at all says why in one line (`Unreachable`); rank 0 names it as a rank that never arrived.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from envcheck.collectives.interface_rules import judge_variable
from envcheck.collectives.rendezvous import Reach, reach_store, resolve
from envcheck.core.result import Status
from envcheck.probe.interfaces import interfaces
from envcheck.probe.slurm_layout import rank_nodes

ARRIVE, WORD = "envcheck/arrive/", "envcheck/rollcall"
WORD_MARGIN_S = 10.0  # the others wait this long beyond rank 0's roll call for its word


class Unreachable(Exception):
    """This rank cannot reach the store (or its port holds no c10d store): the message names why."""


@dataclass
class Joined:
    """A rank's way into the run: the store, and (rank 0) the arrivals it collected."""

    store: Any
    arrivals: dict[int, dict[str, Any]] = field(default_factory=dict)
    master: dict[str, Any] = field(default_factory=dict)  # rank 0's own view of MASTER_ADDR
    layout: list[str] | None = None
    waited_s: float = 0.0
    seen_at: dict[int, float] = field(default_factory=dict)  # rank 0's wall clock when each arrival appeared


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


def interface_problems() -> list[dict[str, str]]:
    """The socket-interface variables set here that select no interface of this node."""
    env = {
        k: os.environ[k]
        for k in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "NCCL_SOCKET_FAMILY")
        if k in os.environ
    }
    data: dict[str, Any] = {"interfaces": interfaces(), "env": env}
    out = []
    for var in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"):
        if var in env:
            finding = judge_variable(var, env[var], data)
            if finding.status is Status.FAIL:
                out.append({"var": var, "value": env[var], "text": finding.text, "fix": finding.fix or ""})
    return out


def arrival(rank: int, reach: Reach | None) -> dict[str, Any]:
    """What this rank tells rank 0 on arrival."""
    return {
        "rank": rank,
        "node": socket.gethostname(),
        "versions": versions(),
        "interfaces": interface_problems(),
        "reach": reach.as_dict() if reach else None,
        "time": time.time(),
    }


def _client(address: str, port: int, world: int, timeout_s: float) -> Any:
    import torch.distributed as dist

    return dist.TCPStore(address, port, world, is_master=False, timeout=timedelta(seconds=timeout_s))


def join(rank: int, world: int, timeout_s: float) -> Joined:
    """Reach (or host) the store and answer the roll call; rank 0 returns with every arrival it got in time."""
    import torch.distributed as dist

    began = time.monotonic()
    name, port = os.environ.get("MASTER_ADDR", "127.0.0.1"), int(os.environ.get("MASTER_PORT", "29500"))
    hosts = rank == 0 and os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True"
    reach: Reach | None = None
    if hosts:
        store = dist.TCPStore(
            name, port, world, is_master=True, timeout=timedelta(seconds=timeout_s), wait_for_workers=False
        )  # OSError (port taken) goes to the caller
    else:
        reach = reach_store(name, port, timeout_s)
        if reach.address is None:
            raise Unreachable(f"rank {rank} on {reach.node}: {reach.problem}")
        try:
            store = _client(reach.address, port, world, max(1.0, timeout_s - (time.monotonic() - began)))
        except (RuntimeError, OSError) as exc:  # DistNetworkError/DistStoreError are RuntimeErrors
            first = str(exc).splitlines()[0][:300]
            why = (
                f"rank {rank} on {reach.node}: {name}:{port} ({reach.address}) accepts connections but no c10d "
                f"store answered there ({first}); another service may hold the port"
            )
            raise Unreachable(why) from None
    store.set(f"{ARRIVE}{rank}", json.dumps(arrival(rank, reach)))
    joined = Joined(store=store, layout=rank_nodes(os.environ))
    if rank != 0:
        return joined
    deadline = began + timeout_s
    waiting = list(range(world))
    while waiting and time.monotonic() < deadline:
        for r in list(waiting):  # first sight of each arrival, on rank 0's clock: the other clock's skew
            if store.check([f"{ARRIVE}{r}"]):
                joined.seen_at[r] = time.time()
                joined.arrivals[r] = json.loads(store.get(f"{ARRIVE}{r}"))
                waiting.remove(r)
        if waiting:
            time.sleep(0.05)
    addrs, error = resolve(name, port)
    joined.master = {
        "name": name,
        "port": port,
        "node": socket.gethostname(),
        "addresses": addrs,
        "error": error,
        "time": time.time(),
    }
    joined.waited_s = time.monotonic() - began
    return joined


def say(store: Any, go: bool, code: int = 0) -> None:
    """Rank 0's word after the roll call: go, or stop with the agreed exit code."""
    store.set(WORD, "go" if go else f"stop:{code}")


def hear(store: Any, timeout_s: float) -> int | None:
    """The others: None to go on, else the exit code rank 0 stopped the run with (1 when it never spoke)."""
    try:
        store.wait([WORD], timedelta(seconds=timeout_s + WORD_MARGIN_S))
        word = store.get(WORD).decode()
    except (RuntimeError, OSError):
        return 1
    return None if word == "go" else int(word.partition(":")[2] or 1)
