"""Reach the rendezvous store (MASTER_ADDR:MASTER_PORT) within a budget, or say exactly why not.

A rank resolves MASTER_ADDR itself (in a thread: a hung resolver is a finding, not a hang), then opens a TCP
connection, retrying refusals (rank 0 may still be importing torch) until the budget is spent. When the name
does not resolve on this node but Slurm knows the node (`scontrol show node NAME`: NodeAddr), the rank goes on
with that address, so its finding reaches rank 0's report; the run still fails, naming the name, this node and
what resolved it. Without this, c10d retries a name that cannot resolve for its whole timeout and raises
`DistNetworkError: The client socket has timed out after 30000ms while trying to connect to (n1, 20160)`.
"""

from __future__ import annotations

import errno
import shutil
import socket
import subprocess
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

RETRY_S = 0.2
CONNECT_S = 2.0
RESOLVE_S = 5.0


@dataclass
class Reach:
    """What one rank saw on its way to the store."""

    name: str
    port: int
    node: str
    addresses: list[str] = field(default_factory=list)
    resolve_error: str | None = None
    slurm_addr: str | None = None  # Slurm's NodeAddr for `name`, asked only when the name did not resolve
    address: str | None = None  # the address that answered
    problem: str | None = None  # why nothing answered (None when reached)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


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
    scontrol = shutil.which("scontrol")
    if scontrol is None:
        return None
    try:
        out = subprocess.run(
            [scontrol, "show", "node", name, "-o"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for word in out.split():
        if word.startswith("NodeAddr="):
            return word.split("=", 1)[1] or None
    return None


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
                return "connection refused (nothing listens there)"
            return f"{exc.strerror or exc}"


def reach_store(name: str, port: int, budget_s: float) -> Reach:
    """Resolve and connect until the budget is spent; `problem` says why not when nothing answered."""
    deadline = time.monotonic() + budget_s
    reach = Reach(name=name, port=port, node=socket.gethostname())
    last: dict[str, str] = {}
    while True:
        addrs, error = resolve(name, port, min(RESOLVE_S, max(0.1, deadline - time.monotonic())))
        reach.addresses, reach.resolve_error = addrs, error
        if not addrs and reach.slurm_addr is None:
            reach.slurm_addr = slurm_node_addr(name)
        for address in addrs or ([reach.slurm_addr] if reach.slurm_addr else []):
            why = connect_error(address, port, min(CONNECT_S, max(0.1, deadline - time.monotonic())))
            if why is None:
                reach.address = address
                return reach
            last[address] = why
        if time.monotonic() + RETRY_S >= deadline:
            break
        time.sleep(RETRY_S)
    if not reach.addresses and reach.slurm_addr is None:
        reach.problem = f"MASTER_ADDR {name!r} does not resolve on {reach.node}: {reach.resolve_error}"
    else:
        tried = "; ".join(f"{addr}: {why}" for addr, why in last.items())
        via = "" if reach.addresses else f" (it does not resolve there; Slurm's NodeAddr {reach.slurm_addr})"
        reach.problem = f"{name}:{port} did not answer from {reach.node} within {budget_s:g}s{via}: {tried}"
    return reach


def port_holder(port: int, timeout_s: float = 5.0) -> str | None:
    """Who listens on TCP `port` here, as `ss -ltnp` shows it (None when unknown)."""
    ss = shutil.which("ss") or shutil.which("ss", path="/usr/sbin:/sbin")
    if ss is None:
        return None
    try:
        out = subprocess.run(
            [ss, "-Hltnp", "sport", "=", f":{port}"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    users = [word for line in out.splitlines() for word in line.split() if word.startswith("users:")]
    return "".join(ch if ch.isprintable() else "?" for ch in users[0])[:200] if users else None
