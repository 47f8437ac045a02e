"""Before the store, look: what one rank can check alone, before it waits on any other rank.

Each rank resolves MASTER_ADDR (with a short timeout), decides whether the name is this node and where rank 0 runs
(Slurm's step layout), judges its interface variables against its own interfaces, measures its clock against the
Slurm controller's (the first rank of each node), and notes the address its backend's transport will take. The rank
that hosts the store also tries the port first: held (and by which process), or dropped even from this node.
A cause seen here is printed at once, in one line, by the rank that saw it, so it is said even if the store never
forms; the look also travels in the rank's arrival, so rank 0's report gathers what it heard.

torch's TCPStore host connects to MASTER_ADDR as a client before it serves anyone and retries until its timeout
(torch/csrc/distributed/c10d/TCPStore.cpp: TCPStore::TCPStore starts the server, then TCPClient::connect(addr_)),
so a name that does not resolve on rank 0's node reads as "The client socket has timed out after ...ms while trying
to connect to (NAME, PORT)" after the whole timeout; the look names it in milliseconds instead.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from types import MappingProxyType
from typing import Any

from envcheck.collectives.crossnode_codes import (
    CLOCK_SKEW,
    INTERFACE,
    MASTER_ELSEWHERE,
    PORT_BLOCKED,
    PORT_TAKEN,
    UNRESOLVED,
)
from envcheck.collectives.crossnode_env import SKEW_FAIL_S
from envcheck.collectives.interface_rules import judge_variable
from envcheck.collectives.rendezvous import resolve
from envcheck.collectives.transport import is_loopback, transport_view
from envcheck.core.result import Status
from envcheck.probe import port_owner, slurm_view
from envcheck.probe.interfaces import infiniband, interfaces
from envcheck.probe.slurm_layout import rank_nodes

RESOLVE_S = 3.0
SELF_CONNECT_S = 1.0
BACKEND_VARS = MappingProxyType(
    {"gloo": ("GLOO_SOCKET_IFNAME",), "nccl": ("NCCL_SOCKET_IFNAME", "NCCL_IB_HCA")}
)


@dataclass
class Look:
    """What one rank saw alone; `problem` is the cause it printed (code and text), if any."""

    rank: int
    node: str
    name: str
    port: int
    addresses: list[str] = field(default_factory=list)
    resolve_error: str | None = None
    local: bool = False
    own: list[str] = field(default_factory=list)  # this node's addresses, loopback left out
    rank0_node: str | None = None
    rank0_addr: str | None = None
    port_state: dict[str, Any] | None = None
    interfaces: list[dict[str, Any]] = field(default_factory=list)
    clock: dict[str, Any] | None = None
    transport: dict[str, Any] = field(default_factory=dict)
    problem: dict[str, str] | None = None
    took_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def plain(address: str) -> str:
    """`::ffff:10.0.0.1` as `10.0.0.1`; other addresses unchanged."""
    try:
        ip = ipaddress.ip_address(address.split("%")[0])
    except ValueError:
        return address
    mapped = getattr(ip, "ipv4_mapped", None)
    return str(mapped) if mapped else str(ip)


def own_addresses(ifaces: list[dict[str, Any]]) -> set[str]:
    """Every address of this node's interfaces."""
    return {plain(a) for i in ifaces for a in (*i.get("ipv4", []), *i.get("ipv6", []))}


def is_here(addresses: list[str], own: set[str]) -> bool:
    """Whether any of `addresses` reaches this node itself (one of its addresses, or loopback)."""
    return any(is_loopback(a) or plain(a) in own for a in addresses)


def srun_direct(env: Mapping[str, str]) -> bool:
    """This process is an srun task itself (not a torchrun worker), so Slurm's layout maps ranks to nodes."""
    return "TORCHELASTIC_RUN_ID" not in env and env.get("SLURM_PROCID") == env.get("RANK")


def rank0_place(env: Mapping[str, str]) -> tuple[str | None, str | None]:
    """(node, address) of rank 0 from Slurm's step layout and NodeAddr; (None, None) when Slurm does not say."""
    layout = rank_nodes(env) if srun_direct(env) else None
    if not layout:
        return None, None
    node = layout[0]
    addr = slurm_view.node_addr(node)
    try:
        ipaddress.ip_address(addr or "")
        return node, addr
    except ValueError:
        found, _ = resolve(addr or node, 0, RESOLVE_S)
        return node, found[0] if found else None


def port_check(port: int, targets: list[str]) -> dict[str, Any]:
    """Bind the port as c10d's libuv server does (`::` dual-stack, then `0.0.0.0`, SO_REUSEADDR) and connect to it
    from here: free, held (and by whom), or blocked (a listener here that this node's own connections cannot reach)."""
    sock: socket.socket | None = None
    for family, address in ((socket.AF_INET6, "::"), (socket.AF_INET, "0.0.0.0")):
        try:
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            sock.bind((address, port))
            sock.listen(16)
            break
        except OSError as exc:
            sock.close() if sock else None
            sock = None
            if exc.errno == errno.EADDRINUSE:
                return {"state": "held", "holders": [h.as_dict() for h in port_owner.holders(port)]}
    if sock is None:
        return {"state": "free"}  # neither family binds for another reason: let c10d say it
    try:
        for target in dict.fromkeys(["127.0.0.1", *targets]):
            why = _connect_error(target, port)
            if why is not None:
                return {"state": "blocked", "target": target, "why": why}
        return {"state": "free"}
    finally:
        sock.close()


def _connect_error(address: str, port: int) -> str | None:
    from envcheck.collectives.rendezvous import connect_error

    return connect_error(address, port, SELF_CONNECT_S)


def interface_problems(
    backend: str, env: Mapping[str, str], ifaces: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The socket-interface and HCA variables set here that select nothing usable on this node; `used` says whether
    the backend of this run reads the variable (a wrong one it does not read breaks another job, not this one)."""
    data: dict[str, Any] = {"interfaces": ifaces, "env": dict(env), "infiniband": None}
    if "NCCL_IB_HCA" in env:
        data["infiniband"] = infiniband()
    out = []
    for var in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA"):
        if var not in env:
            continue
        finding = judge_variable(var, env[var], data)
        if finding.status in (Status.FAIL, Status.WARN):
            out.append(
                {
                    "var": var,
                    "value": env[var],
                    "status": finding.status.value,
                    "used": var in BACKEND_VARS.get(backend, ()),
                    "text": finding.text,
                    "fix": finding.fix or "",
                }
            )
    return out


def clock(env: Mapping[str, str]) -> dict[str, Any] | None:
    """This node's offset from the Slurm controller's clock, measured by the node's first rank (None otherwise)."""
    if env.get("LOCAL_RANK", "0") != "0" or "SLURM_JOB_ID" not in env:
        return None
    found = slurm_view.controller_clock()
    if found is None:
        return None
    return {"offset_s": round(found.offset_s, 3), "round_trip_s": round(found.round_trip_s, 3)}


def look_here(rank: int, backend: str, hosting: bool, env: Mapping[str, str] | None = None) -> Look:
    """This rank's look; `problem` is the cause it sees alone (the gate prints it, in one line)."""
    env = os.environ if env is None else env
    began = time.monotonic()
    name, port = env.get("MASTER_ADDR", "127.0.0.1"), int(env.get("MASTER_PORT", "29500"))
    ifaces = interfaces()
    own = own_addresses(ifaces)
    look = Look(rank=rank, node=socket.gethostname(), name=name, port=port)
    look.addresses, look.resolve_error = resolve(name, port, RESOLVE_S)
    look.local = is_here(look.addresses, own)
    look.own = sorted(a for a in own if not is_loopback(a) and not a.startswith("fe80"))
    look.rank0_node, look.rank0_addr = rank0_place(env)
    look.interfaces = interface_problems(backend, env, ifaces)
    look.clock = clock(env)
    look.transport = transport_view(backend, env, ifaces)
    if hosting:  # the port is this node's whatever the name says: try it before hosting
        targets = [a for a in look.addresses if not is_loopback(a)][:2] if look.local else []
        look.port_state = port_check(port, targets)
    look.problem = own_problem(look, hosting)
    look.took_s = round(time.monotonic() - began, 3)
    return look


def own_problem(look: Look, hosting: bool) -> dict[str, str] | None:
    """The most basic cause this rank can name alone, as (code, text); None when it sees none."""
    where = f"{look.name}:{look.port}"
    state = look.port_state or {}
    if state.get("state") == "held":
        holders = port_owner.describe([port_owner.Holder(**h) for h in state["holders"]])
        return {
            "code": PORT_TAKEN,
            "text": f"port {look.port} on {look.node} is already held ({holders or 'by a process not visible here'})",
        }
    if state.get("state") == "blocked":
        return {
            "code": PORT_BLOCKED,
            "text": f"port {look.port} on {look.node} accepts no connection even from {look.node} itself "
            f"({state['target']}: {state['why']}): a firewall here filters it",
        }
    if not look.addresses:
        return {
            "code": UNRESOLVED,
            "text": f"MASTER_ADDR {look.name!r} does not resolve on {look.node} ({look.resolve_error})",
        }
    if hosting and not look.local:
        return {
            "code": MASTER_ELSEWHERE,
            "text": f"MASTER_ADDR {look.name!r} resolves to {', '.join(look.addresses)}, not an address of "
            f"{look.node}, where rank 0 runs: no rank can host the store at {where}",
        }
    if not hosting and look.local and look.rank0_node and look.rank0_node != look.node:
        return {
            "code": MASTER_ELSEWHERE,
            "text": f"MASTER_ADDR {look.name!r} resolves to {', '.join(look.addresses)}, which is {look.node} "
            f"itself, but rank 0 runs on {look.rank0_node} (Slurm's step layout)",
        }
    used = [p for p in look.interfaces if p["used"] and p["status"] == "fail"]
    if used:
        return {"code": INTERFACE, "text": used[0]["text"]}
    offset = float((look.clock or {}).get("offset_s", 0.0))
    if abs(offset) >= SKEW_FAIL_S:
        return {
            "code": CLOCK_SKEW,
            "text": f"{look.node}'s clock is {abs(offset):.1f}s {'ahead of' if offset > 0 else 'behind'} the Slurm "
            "controller's",
        }
    return None
