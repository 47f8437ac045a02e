"""Reach the rendezvous store (MASTER_ADDR:MASTER_PORT) within a budget, or say exactly why not.

A rank resolves MASTER_ADDR itself (in a thread: a hung resolver is a finding, not a hang), then opens a TCP
connection, retrying refusals (rank 0 may still be importing torch) until the budget is spent. When the name's
addresses do not answer (or it does not resolve here) and Slurm knows where rank 0 runs, the rank also tries that
node's address, so its finding still reaches rank 0's report. An address that drops connections while the same
host answers on slurmd's port is a firewall on the store's port, said as soon as it is seen. Without this, c10d
retries a name that cannot resolve for its whole timeout and raises `DistNetworkError: The client socket has timed
out after 30000ms while trying to connect to (n1, 20160)`.
"""

from __future__ import annotations

import errno
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from envcheck.probe import slurm_view

RETRY_S = 0.2
CONNECT_S = 2.0
RESOLVE_S = 5.0
WITNESS_S = 1.0
DROPS_BEFORE_WITNESS = 2
SLURMD_PORT = 6818  # slurm.conf's SlurmdPort default


@dataclass
class Reach:
    """What one rank saw on its way to the store."""

    name: str
    port: int
    node: str
    addresses: list[str] = field(default_factory=list)
    resolve_error: str | None = None
    fallback: str | None = None  # rank 0's node as Slurm places it, tried when the name's addresses fail
    address: str | None = None  # the address that answered
    tried: dict[str, str] = field(default_factory=dict)  # address -> why it did not answer (last attempt)
    witness: dict[str, Any] | None = None  # slurmd's port on a host that dropped the store's port
    problem: str | None = None  # why nothing answered (None when reached)

    @property
    def via_fallback(self) -> bool:
        """The store answered at rank 0's node's address, not at one of the name's own."""
        own = {a.removeprefix("::ffff:") for a in self.addresses}
        return self.address is not None and self.address.removeprefix("::ffff:") not in own

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "via_fallback": self.via_fallback}


def resolve(name: str, port: int, timeout_s: float = RESOLVE_S) -> tuple[list[str], str | None]:
    """(addresses, error) for `name` as this node's resolver answers, never waiting past `timeout_s`."""
    box: dict[str, Any] = {}

    def ask() -> None:
        try:
            infos = socket.getaddrinfo(name, port, type=socket.SOCK_STREAM)
            box["addrs"] = list(dict.fromkeys(str(info[4][0]) for info in infos))
        except OSError as exc:
            box["error"] = f"{type(exc).__name__}: {exc}"

    thread = threading.Thread(target=ask, name="envcheck-resolve", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        return [], f"the resolver did not answer within {timeout_s:g}s"
    return box.get("addrs", []), box.get("error")


def slurm_node_addr(name: str, timeout_s: float = 5.0) -> str | None:
    """NodeAddr of Slurm node `name` (None outside Slurm or when it is not a node)."""
    return slurm_view.node_addr(name, timeout_s)


def connect_error(address: str, port: int, timeout_s: float) -> str | None:
    """None when a TCP connection to address:port opens, else why not (refused, no answer, unreachable)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout_s)
        try:
            sock.connect((address, port))
            return None
        except TimeoutError:
            return f"no answer within {timeout_s:g}s (a firewall drops it, or the link is down)"
        except OSError as exc:
            if exc.errno == errno.ECONNREFUSED:
                return "connection refused (nothing listens there, or a firewall rejects it)"
            return f"{exc.strerror or exc}"


def _distinct(addresses: list[str]) -> list[str]:
    """One address per host: `::ffff:10.0.0.1` is 10.0.0.1 again."""
    out: dict[str, str] = {}
    for a in addresses:
        out.setdefault(a.removeprefix("::ffff:"), a)
    return list(out.values())


def reach_store(
    name: str,
    port: int,
    budget_s: float,
    found: tuple[list[str], str | None] | None = None,
    fallback: str | None = None,
    say: Callable[[str], None] | None = None,
) -> Reach:
    """Connect to the name's addresses (or, when they fail, to `fallback`) until the budget is spent; `problem`
    says why not when nothing answered. `say` gets one line as soon as a firewall on the port is evident."""
    deadline = time.monotonic() + budget_s
    reach = Reach(name=name, port=port, node=socket.gethostname(), fallback=fallback)
    reach.addresses, reach.resolve_error = found if found is not None else resolve(name, port)
    drops: dict[str, int] = {}
    while True:
        if not reach.addresses and reach.resolve_error and found is None:
            reach.addresses, reach.resolve_error = resolve(name, port, min(RESOLVE_S, _left(deadline)))
        direct = _distinct(reach.addresses)
        dropped = [a for a in direct if drops.get(a)]  # a drop is not rank 0 starting late: try those last
        order = [a for a in direct if a not in dropped]
        order += [fallback] if fallback and fallback not in direct else []
        for address in [*order, *dropped]:
            why = connect_error(address, port, min(CONNECT_S, _left(deadline)))
            if why is None:
                live = [a for a in direct if a not in dropped]
                if address == fallback and live and _retry_direct(reach, live, port):
                    return reach
                reach.address = address
                return reach
            reach.tried[address] = why
            drops[address] = drops.get(address, 0) + why.startswith("no answer")
            if drops[address] == DROPS_BEFORE_WITNESS and reach.witness is None:
                _witness(reach, address, say)
        if time.monotonic() + RETRY_S >= deadline:
            break
        time.sleep(RETRY_S)
    tried = "; ".join(f"{addr}: {why}" for addr, why in reach.tried.items())
    if not reach.addresses and not fallback:
        reach.problem = f"MASTER_ADDR {name!r} does not resolve on {reach.node}: {reach.resolve_error}"
    else:
        via = "" if reach.addresses else f" (it does not resolve there; rank 0's node per Slurm: {fallback})"
        reach.problem = f"{name}:{port} did not answer from {reach.node} within {budget_s:g}s{via}: {tried}"
    return reach


def _left(deadline: float) -> float:
    return max(0.1, deadline - time.monotonic())


def _retry_direct(reach: Reach, direct: list[str], port: int) -> bool:
    """The fallback answered: try the name's own addresses once more (rank 0 may only now be listening)."""
    for address in direct:
        why = connect_error(address, port, CONNECT_S)
        if why is None:
            reach.address = address
            reach.tried.pop(address, None)
            return True
        reach.tried[address] = why  # said while rank 0 was listening (its fallback address answered)
    return False


def _witness(reach: Reach, address: str, say: Callable[[str], None] | None) -> None:
    """Does the host that drops the store's port answer on slurmd's port? Then a firewall filters the port."""
    why = connect_error(address, SLURMD_PORT, WITNESS_S)
    reach.witness = {"address": address, "port": SLURMD_PORT, "error": why}
    if why is None and say is not None:
        say(
            f"{address} answers on slurmd's port {SLURMD_PORT} but drops connections to {reach.port} "
            f"(MASTER_PORT) from {reach.node}: a firewall filters that port"
        )
