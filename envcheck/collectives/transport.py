"""The address each backend's transport takes on this node, read the way the library reads it, with the carrier
of the interface that holds it and any rate-shaping queue on it: what a rank tells rank 0 on arrival, so that a
connection between nodes that fails, or runs slowly, can be named with its node, address and cause.

gloo (torch's ProcessGroupGloo.cpp, createDefaultDevice; gloo/transport/tcp/device.cc): GLOO_SOCKET_IFNAME names
the interface and gloo takes that interface's first address in getifaddrs order (lookupAddrForIface); without it,
the host name is resolved (getaddrinfo, AF_UNSPEC) and the first address that bind(2) accepts is taken
(lookupAddrForHostname); when none binds, torch warns "Unable to resolve hostname to a (local) address. Using the
loopback address as fallback" and takes 127.0.0.1. A host name that /etc/hosts maps to 127.0.1.1 (Debian's default)
binds, so gloo advertises a loopback address to the other nodes.
NCCL (src/misc/socket.cc, ncclFindInterfaces): NCCL_SOCKET_IFNAME's list, else InfiniBand interfaces (`ib`) first,
then any other but docker, loopback and virbr, then docker, then loopback; an interface must be up with an address.
"""

from __future__ import annotations

import ipaddress
import json
import shutil
import socket
import subprocess
from collections.abc import Mapping
from typing import Any

from envcheck.collectives.interface_rules import gloo_pieces, nccl_matches, nccl_usable
from envcheck.collectives.rendezvous import resolve
from envcheck.probe.interfaces import IFF_LOOPBACK, IFF_LOWER_UP, IFF_UP

DEFAULT_QDISCS = frozenset({"noqueue", "pfifo_fast", "fq_codel", "mq", "fq", "pfifo", "bfifo", "sfq", "cake"})
TORCH_LOOPBACK = "127.0.0.1"  # torch's kLoopbackAddress


def is_loopback(address: str | None) -> bool:
    """127.0.0.0/8, ::1, and their v4-mapped form."""
    if not address:
        return False
    try:
        ip = ipaddress.ip_address(address.split("%")[0])
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return bool((mapped or ip).is_loopback)


def _first_address(iface: Mapping[str, Any]) -> str | None:
    addrs = [*iface.get("ipv4", []), *iface.get("ipv6", [])]  # getifaddrs lists IPv4 before IPv6
    return str(addrs[0]) if addrs else None


def _binds(address: str) -> bool:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.bind((address, 0))
        return True
    except OSError:
        return False


def gloo_address(env: Mapping[str, str], ifaces: list[dict[str, Any]], hostname: str) -> dict[str, Any]:
    """gloo's address here and how it was chosen (address None: the variable names nothing usable)."""
    pieces = gloo_pieces(env.get("GLOO_SOCKET_IFNAME", ""))
    if pieces:
        by_name = {str(i["name"]): i for i in ifaces}
        address = _first_address(by_name.get(pieces[0], {}))
        return {"address": address, "how": f"GLOO_SOCKET_IFNAME={env['GLOO_SOCKET_IFNAME']}"}
    addrs, error = resolve(hostname, 0, 3.0)
    for address in addrs:
        if _binds(address):
            return {"address": address, "how": f"its host name {hostname}", "hostname_addresses": addrs}
    why = error or f"none of {', '.join(addrs)} binds here"
    return {
        "address": TORCH_LOOPBACK,
        "how": f"torch's loopback fallback ({hostname} does not resolve: {why})",
    }


def _nccl_order(iface: Mapping[str, Any]) -> int:
    name = str(iface["name"])
    if name.startswith("ib"):
        return 0
    if iface.get("flags", 0) & IFF_LOOPBACK:
        return 3
    if name.startswith("virbr"):
        return 4
    return 2 if name.startswith("docker") else 1


def nccl_address(env: Mapping[str, str], ifaces: list[dict[str, Any]]) -> dict[str, Any]:
    """NCCL's socket address here (address None: nothing usable matches)."""
    family = env.get("NCCL_SOCKET_FAMILY")
    value = env.get("NCCL_SOCKET_IFNAME", "")
    usable = [i for i in ifaces if nccl_usable(i, family)]
    if len(value) > 1:
        chosen = [i for i in usable if nccl_matches(value, str(i["name"]))]
        how = f"NCCL_SOCKET_IFNAME={value}"
    else:
        chosen = sorted(usable, key=_nccl_order)
        how = "NCCL's own order (ib*, then others, docker, loopback)"
    return {"address": _first_address(chosen[0]) if chosen else None, "how": how}


def holding(address: str | None, ifaces: list[dict[str, Any]]) -> str | None:
    """The interface that holds `address` here (loopback addresses: the loopback interface)."""
    if address is None:
        return None
    for iface in ifaces:
        if address in iface.get("ipv4", []) or address in iface.get("ipv6", []):
            return str(iface["name"])
    if is_loopback(address):
        return next((str(i["name"]) for i in ifaces if i.get("flags", 0) & IFF_LOOPBACK), "lo")
    return None


def carrier(iface: Mapping[str, Any]) -> bool | None:
    """Whether an interface that is up has carrier: IFF_LOWER_UP of its netlink flags (what `ip link` shows as
    LOWER_UP, or NO-CARRIER without it). Read from getifaddrs, which answers for this network namespace, where
    /sys/class/net shows whichever namespace mounted /sys. None for an interface that is down."""
    flags = int(iface.get("flags", 0))
    return bool(flags & IFF_LOWER_UP) if flags & IFF_UP else None


def shaping(name: str, timeout_s: float = 3.0) -> dict[str, Any] | None:
    """The root queueing discipline on `name` when it shapes traffic (tbf, netem, htb...), from `tc -j qdisc`."""
    tc = shutil.which("tc") or shutil.which("tc", path="/usr/sbin:/sbin")
    if tc is None:
        return None
    try:
        out = subprocess.run(
            [tc, "-j", "qdisc", "show", "dev", name, "root"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        ).stdout
        qdiscs = json.loads(out or "[]")
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    for q in qdiscs if isinstance(qdiscs, list) else []:
        if isinstance(q, dict) and q.get("root") and q.get("kind") not in DEFAULT_QDISCS:
            return {"kind": str(q.get("kind")), "options": q.get("options", {})}
    return None


def transport_view(backend: str, env: Mapping[str, str], ifaces: list[dict[str, Any]]) -> dict[str, Any]:
    """What this rank's backend will use: address, how it was chosen, the interface, its carrier and shaping."""
    chosen = (
        nccl_address(env, ifaces) if backend == "nccl" else gloo_address(env, ifaces, socket.gethostname())
    )
    iface = holding(chosen["address"], ifaces)
    found = next((i for i in ifaces if i["name"] == iface), None)
    return {
        "backend": backend,
        **chosen,
        "iface": iface,
        "carrier": carrier(found) if found else None,
        "shaping": shaping(iface) if iface and not is_loopback(chosen["address"]) else None,
    }
