"""How each library picks its network interface from its variable, from their sources: gloo takes exact names
(GLOO_SOCKET_IFNAME), NCCL prefixes with `^` to exclude and `=` for exact names (NCCL_SOCKET_IFNAME, NCCL_IB_HCA),
TensorPipe one name that is up (TP_SOCKET_IFNAME). Shared by net.ifname and the collectives' failure naming."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from envcheck.core.result import Status
from envcheck.probe.interfaces import IFF_LOOPBACK, IFF_RUNNING, IFF_UP

JUDGED = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "NCCL_IB_HCA")


VARIABLES = (*JUDGED, "NCCL_SOCKET_FAMILY")


LISTED = 12  # interfaces named in a summary; measured has them all


def _up(i: Mapping[str, Any]) -> bool:
    return bool(i.get("flags", 0) & IFF_UP)


def _running(i: Mapping[str, Any]) -> bool:
    return bool(i.get("flags", 0) & IFF_UP and i.get("flags", 0) & IFF_RUNNING)


def _addressed(i: Mapping[str, Any]) -> bool:
    return bool(i.get("ipv4") or i.get("ipv6"))


def nccl_list(value: str) -> tuple[bool, bool, list[tuple[str, int]]]:
    """NCCL's reading of a list: (exclude '^', exact '=', [(name or prefix, port or -1)])."""
    exclude = value.startswith("^")
    value = value[1:] if exclude else value
    exact = value.startswith("=")
    entries = []
    for entry in (value[1:] if exact else value).split(","):  # strtok: empty entries are skipped
        name, _, rest = entry.partition(":")
        port = rest.partition(":")[0]
        if name:  # an absent or empty port is -1; otherwise atoi (no leading number: 0)
            number = re.match(r"\s*[+-]?\d+", port)
            entries.append((name, int(number.group()) if number else (0 if port else -1)))
    return exclude, exact, entries


def nccl_matches(value: str, name: str, port: int = -1) -> bool:
    """NCCL's matchIfList XOR '^': does `name` (and `port`) pass the list? An empty list passes everything."""
    exclude, exact, entries = nccl_list(value)
    hit = not entries or any(
        (name == p if exact else name.startswith(p)) and (-1 in (port, q) or port == q) for p, q in entries
    )
    return hit != exclude


def nccl_usable(iface: Mapping[str, Any], family: str | None) -> bool:
    """An interface NCCL's socket code would take: running, with an address of the forced family if any."""
    v4 = bool(iface.get("ipv4")) and family != "AF_INET6"
    v6 = any(a != "::1" for a in iface.get("ipv6", [])) and family != "AF_INET"
    return _running(iface) and (v4 or v6)


def gloo_pieces(value: str) -> list[str] | None:
    """The names PyTorch gives gloo (std::getline on ','); None when the value is ignored (one character or less)."""
    if len(value) <= 1:
        return None
    pieces = value.split(",")
    return pieces[:-1] if pieces[-1] == "" else pieces


def describe(iface: Mapping[str, Any]) -> str:
    """E.g. `eth0 (192.0.2.2)`, `docker0 (172.17.0.1, not running)`, `ifb0 (down, no address)`."""
    notes = [
        *(["loopback"] if iface.get("flags", 0) & IFF_LOOPBACK else []),
        *(iface.get("ipv4") or iface.get("ipv6") or ["no address"])[:1],
    ]
    if not _up(iface):
        notes.insert(0, "down")
    elif not _running(iface):
        notes.append("not running")
    return f"{iface['name']} ({', '.join(notes)})"


def listing(ifaces: list[Mapping[str, Any]]) -> str:
    """The interfaces here, for a summary (the first LISTED of them)."""
    text = ", ".join(describe(i) for i in ifaces[:LISTED]) or "none"
    return text + (f" and {len(ifaces) - LISTED} more" if len(ifaces) > LISTED else "")


def suggestion(ifaces: list[Mapping[str, Any]]) -> str | None:
    """A running, addressed, non-loopback interface to name in a fix; bridges and veths last (NCCL's order)."""
    good = [i for i in ifaces if _running(i) and _addressed(i) and not i.get("flags", 0) & IFF_LOOPBACK]
    good.sort(key=lambda i: str(i["name"]).startswith(("docker", "veth", "virbr", "br-", "cni", "cali")))
    return str(good[0]["name"]) if good else None


class VariableVerdict(NamedTuple):
    """One variable's verdict: 'pass', 'warn' or 'fail', a sentence, the fix, and what it selects."""

    status: Status
    text: str
    fix: str | None = None
    matches: tuple[str, ...] = ()


def _fix(var: str, ifaces: list[Mapping[str, Any]]) -> str:
    name = suggestion(ifaces)
    if name is None:
        return f"unset {var} (no non-loopback interface is up here; {var}=lo suits a single-node run)"
    return f"export {var}={name} (an interface that exists here), or unset {var}"


def judge_variable(var: str, value: str, data: Mapping[str, Any]) -> VariableVerdict:
    """The verdict on one variable against the captured interfaces, read the way its library reads it."""
    ifaces: list[Mapping[str, Any]] = list(data.get("interfaces", []))
    by_name = {str(i["name"]): i for i in ifaces}
    here = f"interfaces here: {listing(ifaces)}"
    if var == "NCCL_IB_HCA":
        return _judge_hca(value, data.get("infiniband"))
    if var == "GLOO_SOCKET_IFNAME":
        pieces = gloo_pieces(value)
        if pieces is None:
            return VariableVerdict(
                Status.PASS, f"{var}={value!r} is ignored (PyTorch reads it when longer than one character)"
            )
        bad = [
            "an empty name between commas"
            if not p
            else f"{p!r} does not exist"
            if p not in by_name
            else f"{p!r} has no IP address"
            for p in pieces
            if not p or not _addressed(by_name.get(p, {}))
        ]
        if bad:
            return VariableVerdict(
                Status.FAIL,
                f"{var}={value}: {'; '.join(bad)} (gloo takes a comma list of exact interface "
                f"names, each with an IP address); {here}",
                _fix(var, ifaces),
            )
        return VariableVerdict(Status.PASS, f"{var}={value} names {', '.join(pieces)}", matches=tuple(pieces))
    if var == "TP_SOCKET_IFNAME":
        iface = by_name.get(value)
        if iface is None or not (_running(iface) and _addressed(iface)):
            why = "does not exist" if iface is None else "is not up and running with an IP address"
            return VariableVerdict(
                Status.FAIL,
                f"{var}={value}: {value!r} {why}, so TensorPipe (torch RPC) warns and listens on "
                f"127.0.0.1, which other hosts cannot reach; {here}",
                _fix(var, ifaces),
            )
        return VariableVerdict(Status.PASS, f"{var}={value} names {value}", matches=(value,))
    if len(value) <= 1:
        return VariableVerdict(
            Status.PASS, f"{var}={value!r} is ignored (NCCL reads it when longer than one character)"
        )
    family = data.get("env", {}).get("NCCL_SOCKET_FAMILY")
    listed = [i for i in ifaces if nccl_matches(value, str(i["name"]))]
    usable = tuple(str(i["name"]) for i in listed if nccl_usable(i, family))
    if usable:
        return VariableVerdict(Status.PASS, f"{var}={value} matches {', '.join(usable)}", matches=usable)
    of = f" of {family}" if family in ("AF_INET", "AF_INET6") else ""
    unusable = (
        f" ({', '.join(describe(i) for i in listed)}: not running with an IP address{of})" if listed else ""
    )
    return VariableVerdict(
        Status.FAIL,
        f"{var}={value} matches no usable interface{unusable} (NCCL reads a comma list of "
        f"prefixes, '^' excludes, '=' exact names); {here}",
        _fix(var, ifaces),
    )


def _judge_hca(value: str, hcas: list[Mapping[str, Any]] | None) -> VariableVerdict:
    var = "NCCL_IB_HCA"
    if hcas is None:
        return VariableVerdict(
            Status.WARN,
            f"{var}={value} but this host shows no InfiniBand devices (no /sys/class/infiniband): "
            "NCCL finds no IB device and falls back to TCP sockets",
            f"unset {var}, or run where the HCAs "
            "are present (containers: --device=/dev/infiniband --cap-add=IPC_LOCK)",
        )
    ports = [(str(h["name"]), int(p["port"]), str(p.get("state"))) for h in hcas for p in h.get("ports", [])]
    active = tuple(f"{n}:{p}" for n, p, s in ports if s == "ACTIVE" and nccl_matches(value, n, p))
    if active:
        return VariableVerdict(Status.PASS, f"{var}={value} matches {', '.join(active)}", matches=active)
    present = ", ".join(f"{n}:{p} {s}" for n, p, s in ports) or "none"
    usable = next((n for n, _, s in ports if s == "ACTIVE"), None)
    return VariableVerdict(
        Status.WARN,
        f"{var}={value} matches no active InfiniBand port (NCCL's prefix/'^'/'=' list; HCAs here: "
        f"{present}): NCCL falls back to TCP sockets",
        f"export {var}={usable}, or unset {var}"
        if usable
        else f"unset {var}, or bring an HCA port up (ibstat)",
    )
