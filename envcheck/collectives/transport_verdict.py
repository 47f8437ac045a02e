"""The transport probe's verdict (`dist.transport`): a pure function of each node's transport view (its arrival) and the
probe's outcomes (envcheck.collectives.transport_probe).

A connection the backend would open that fails, or opens but moves no data (the backend would hang on it), is named
by its evidence, in this order: the address the listening node advertised is a loopback address (its host name
resolves to 127.0.1.1: gloo takes it, the other nodes reach only themselves there); an end's interface is up without
carrier; otherwise, for a connection that would not open, a filter between the nodes lets the store's port through
but not the transport's, and for one that moved no data, only that (a failure; a warning where the data stalled
rather than met an error, since a very slow link stalls too). A connection that only works because the node with
the loopback address opens it (gloo's greater-address rule) is a warning. A slow link is a figure, and at most a
warning naming the node (its own traffic shaping, or the sender of every slow direction); never a failure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from envcheck.collectives.crossnode import combine_causes
from envcheck.collectives.crossnode_codes import (
    TRANSPORT_BLOCKED,
    TRANSPORT_LOOPBACK,
    TRANSPORT_NO_CARRIER,
    TRANSPORT_NO_DATA,
    TRANSPORT_SLOW,
)
from envcheck.collectives.transport import is_loopback
from envcheck.core.result import FaultClass, Result, failed, passed, warned

NAME = "dist.transport"  # the backend's own connections between nodes, probed after the roll call
SLOW_FRACTION = 0.25  # a direction this far below the fastest one is slow
SLOW_MIN_S = 0.1  # and only when it took this long (fast links time in milliseconds, where noise rules)
MB = 1e6
LISTED = 4  # links named in a passing summary; measured has them all


def _views(arrivals: Mapping[int, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for f in arrivals.values():
        out.setdefault(str(f["node"]), (f.get("look") or {}).get("transport") or {})
    return out


def _iface_fix(backend: str, node: str, view: Mapping[str, Any], good: str | None) -> str:
    var = "NCCL_SOCKET_IFNAME" if backend == "nccl" else "GLOO_SOCKET_IFNAME"
    name = good or "<an interface that reaches the other nodes>"
    return f"on {node}: export {var}={name} (an interface with a cable and an address every node reaches)"


def _links(
    at: Mapping[int, Mapping[str, Any]], results: Mapping[int, Mapping[str, Any]]
) -> list[dict[str, Any]]:
    links = []
    for rank, outcomes in results.items():
        for peer, outcome in outcomes.items():
            src, dst = at.get(rank, {}), at.get(int(peer), {})
            links.append(
                {
                    "from": src.get("node"),
                    "to": dst.get("node"),
                    "from_address": src.get("address"),
                    "address": dst.get("address"),
                    "port": dst.get("port"),
                    **outcome,
                }
            )
    return links


def _failure(
    link: Mapping[str, Any],
    views: Mapping[str, Mapping[str, Any]],
    backend: str,
    store: str,
    common: Sequence[str] = (),
) -> Result:
    """The cause of one connection that would not open or moved no data. `common`: the nodes at an end of every
    connection that moved no data (the one to name when the probe found nothing else)."""
    src, dst = str(link["from"]), str(link["to"])
    where = f"{link['address']}:{link['port']}"
    if link.get("ok"):
        moved = f"but no data moved over it ({link['transfer_error']})"
        opened = f"{src} opened {backend}'s connection to {dst} at {where}, {moved}"
    else:
        opened = f"{src} could not open {backend}'s connection to {dst} at {where} ({link['error']})"
    # A connection that opened reached something: a loopback address explains it only at the listening end (the
    # connect landed on the opener's own host); a node with a loopback address that opens connections is a warning.
    ends = (dst,) if link.get("ok") else (dst, src)
    loop = sorted(n for n in ends if is_loopback(views.get(n, {}).get("address")))
    if loop:
        how = "; ".join(f"{n}'s is {views[n]['address']}, from {views[n].get('how')}" for n in loop)
        return failed(
            f"{opened}: {backend}'s address on {', '.join(loop)} is a loopback address ({how}), which the other "
            f"nodes cannot reach",
            f"map each host name to its own address in {', '.join(loop)}'s /etc/hosts (not 127.0.1.1), or "
            + _iface_fix(backend, loop[0], views.get(loop[0], {}), None).removeprefix(f"on {loop[0]}: "),
            measured={"link": dict(link), "nodes": loop, "addresses": {n: views[n]["address"] for n in loop}},
            fault_class=FaultClass.NODE,
            code=TRANSPORT_LOOPBACK,
        )
    dark = sorted(n for n in (dst, src) if views.get(n, {}).get("carrier") is False)
    if dark:
        said = "; ".join(
            f"{n}'s {views[n].get('iface')} ({views[n].get('address')}, chosen by {views[n].get('how')})"
            for n in dark
        )
        return failed(
            f"{opened}: the interface {backend} uses is up but has no carrier on {said}",
            f"on {dark[0]}: check the cable or switch port of {views[dark[0]].get('iface')} (`ip link show "
            f"{views[dark[0]].get('iface')}` says NO-CARRIER), or point {backend} at another interface",
            measured={
                "link": dict(link),
                "nodes": dark,
                "interfaces": {n: views[n].get("iface") for n in dark},
            },
            fault_class=FaultClass.NODE,
            code=TRANSPORT_NO_CARRIER,
        )
    if link.get("ok"):
        named = list(common) or sorted({src, dst})
        make = warned if link.get("stalled") else failed
        return make(
            f"{opened}; the probe cannot tell where the data stopped"
            + (
                " (or whether the link is only too slow to move 1 MiB in time)" if link.get("stalled") else ""
            ),
            f"on {src}: `ip route get {link['address']}` names the interface it takes to {dst}; then look for a "
            f"filter between them",
            measured={"link": dict(link), "nodes": named},
            fault_class=FaultClass.NODE,
            code=TRANSPORT_NO_DATA,
        )
    return failed(
        f"{opened}, while every node reached the rendezvous store {store}: a firewall on {dst} (or on the way out "
        f"of {src}) lets the rendezvous port through but not {backend}'s own ports",
        f"allow TCP between the job's nodes on the ports the kernel hands out ({backend} listens on an ephemeral "
        f"port: `cat /proc/sys/net/ipv4/ip_local_port_range` on {dst}), not only MASTER_PORT",
        measured={"link": dict(link), "nodes": [dst]},
        fault_class=FaultClass.NODE,
        code=TRANSPORT_BLOCKED,
    )


def _rate(link: Mapping[str, Any], key: str) -> float | None:
    took = link.get(f"{key}_s")
    return link["bytes"] / took / MB if took else None


def _shaping(found: Mapping[str, Any]) -> str:
    """`tbf rate 50 Mbit/s`, `netem delay 100 ms`: tc's JSON options (rates in bytes/s, times in us) in words."""
    options = found.get("options") or {}
    words = [str(found.get("kind"))]
    if isinstance(options.get("rate"), (int, float)):
        words.append(f"rate {options['rate'] * 8 / 1e6:g} Mbit/s")
    delay = options.get("delay")
    if isinstance(delay, dict) and isinstance(delay.get("delay"), (int, float)):
        words.append(f"delay {delay['delay'] * 1000:g} ms")
    return " ".join(words)


def _slow(links: list[dict[str, Any]], views: Mapping[str, Mapping[str, Any]]) -> Result | None:
    rated: list[tuple[str, str, float, float]] = []  # (sender, receiver, MB/s, seconds)
    for link in links:
        if not link.get("ok") or "up_s" not in link:
            continue
        for sender, receiver, key in ((link["from"], link["to"], "up"), (link["to"], link["from"], "down")):
            rate = _rate(link, key)
            if rate:
                rated.append((str(sender), str(receiver), rate, float(link[f"{key}_s"])))
    if len(rated) < 2:
        return None
    best = max(d[2] for d in rated)
    slow = [d for d in rated if d[2] < SLOW_FRACTION * best and d[3] >= SLOW_MIN_S]
    if not slow:
        return None
    shaped = sorted(n for n in {d[0] for d in slow} | {d[1] for d in slow} if views.get(n, {}).get("shaping"))
    senders = {d[0] for d in slow}
    nodes = shaped or (sorted(senders) if len(senders) == 1 else sorted(senders | {d[1] for d in slow}))
    figures = ", ".join(f"{a}→{b} {r:.1f} MB/s" for a, b, r, _ in slow)
    why = "; ".join(
        f"{n}'s {views[n].get('iface')} is shaped by tc ({_shaping(views[n]['shaping'])})" for n in shaped
    )
    return warned(
        f"slow link at {', '.join(nodes)}: {figures}, against {best:.0f} MB/s on the fastest direction"
        f"{f' ({why})' if why else ''}; the run went on (slow is not broken)",
        f"on {nodes[0]}: `tc qdisc show`, `ethtool {views.get(nodes[0], {}).get('iface') or 'IFACE'}` (speed, "
        "errors); compare with `--pairwise` busbw",
        measured={
            "nodes": nodes,
            "slow": [{"from": a, "to": b, "MBps": round(r, 2)} for a, b, r, _ in slow],
            "best_MBps": round(best, 1),
        },
        fault_class=FaultClass.NODE,
        code=TRANSPORT_SLOW,
    )


def _latent_loopback(views: Mapping[str, Mapping[str, Any]], backend: str) -> Result | None:
    """Every connection opened, but a node advertised a loopback address: it opened them all itself."""
    loop = sorted(n for n, v in views.items() if is_loopback(v.get("address")))
    if not loop:
        return None
    how = "; ".join(f"{views[n]['address']} from {views[n].get('how')}" for n in loop)
    var = "NCCL_SOCKET_IFNAME" if backend == "nccl" else "GLOO_SOCKET_IFNAME"
    return warned(
        f"{backend}'s address on {', '.join(loop)} is a loopback address ({how}): it worked here only because "
        f"{', '.join(loop)} opened every connection ({backend} lets the greater address connect); a node whose "
        "address is greater than that loopback address could not reach it",
        f"map the host name to its own address in {', '.join(loop)}'s /etc/hosts (not 127.0.1.1), or export {var} "
        f"on {', '.join(loop)}",
        measured={"nodes": loop},
        fault_class=FaultClass.NODE,
        code=TRANSPORT_LOOPBACK,
    )


def judge_transport(
    arrivals: Mapping[int, Mapping[str, Any]],
    at: Mapping[int, Mapping[str, Any]],
    results: Mapping[int, Mapping[str, Any]],
    backend: str,
    store: str,
    took_s: float,
) -> Result:
    """One dist.transport result: FAIL naming each connection that would not open or moved no data (WARN where the
    data only stalled and nothing else explains it), WARN for a latent loopback address or a slow link, else PASS
    with each link's figures."""
    views = _views(arrivals)
    links = _links(at, results)
    silent = [{str(x["from"]), str(x["to"])} for x in links if x.get("ok") and x.get("transfer_error")]
    common = sorted(set.intersection(*silent)) if len(silent) > 1 else []
    found = [
        _failure(link, views, backend, store, common)
        for link in links
        if not link.get("ok") or link.get("transfer_error")
    ]
    unheard = sorted(str(a.get("node")) for r, a in at.items() if a.get("error"))
    if not found:
        latent = _latent_loopback(views, backend)
        if latent:
            found.append(latent)
        slow = _slow(links, views)
        if slow:
            found.append(slow)
    measured = {
        "backend": backend,
        "links": links,
        "addresses": {n: v.get("address") for n, v in views.items()},
    }
    if unheard:
        measured["no_listener"] = unheard
    if found:
        result = combine_causes(found)
        return replace(result, measured={**measured, **result.measured}).named(NAME, took_s)
    figures = "; ".join(
        f"{x['from']}→{x['to']} ({x['from_address']} → {x['address']}) connect {x['connect_s'] * 1000:.1f} ms"
        + (
            f", 1 MiB {_rate(x, 'up'):.0f}/{_rate(x, 'down'):.0f} MB/s"
            if x.get("up_s") and x.get("down_s")
            else ""
        )
        for x in links[:LISTED]
    ) + (f"; and {len(links) - LISTED} more" if len(links) > LISTED else "")
    return passed(
        f"{backend}'s connections between nodes open: {figures or 'no pair of nodes to probe'}",
        measured=measured,
    ).named(NAME, took_s)
