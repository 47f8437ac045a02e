"""`net.ifname`: GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME, TP_SOCKET_IFNAME and NCCL_IB_HCA against the interfaces
this host has, each read the way its own library reads it (no torch).

Capture calls getifaddrs(3), as gloo, NCCL and TensorPipe (libuv) do, and reads /sys/class/infiniband. Semantics:
- gloo (torch/csrc/distributed/c10d/init.cpp, gloo/transport/tcp/device.cc lookupAddrForIface): read when longer
  than one character; split on ',' (std::getline: a trailing comma adds nothing, an inner empty piece is an error);
  each piece an exact name with an IPv4/IPv6 address, up or not ("Unable to find address for: X").
- NCCL (docs env.html#nccl-socket-ifname; src/misc/socket.cc ncclFindInterfaces, src/os/linux.cc, src/misc/utils.cc
  parseStringList/matchIfList): read when longer than one character; leading '^' excludes, then '=' makes names
  exact, else each comma entry (empty ones skipped, ':port' cut off) is a prefix; only running interfaces with an
  IPv4 or non-loopback IPv6 address count, of NCCL_SOCKET_FAMILY's family when that is AF_INET or AF_INET6.
- TensorPipe (torch/csrc/distributed/rpc/tensorpipe_agent.cpp guessAddress): one exact name of an up, running
  interface with an address (libuv uv_interface_addresses); otherwise it warns and listens on 127.0.0.1.
- NCCL_IB_HCA (src/transport/net_ib/init.cc): NCCL's list syntax over HCA names and ':port', active ports only; no
  match means 'NET/IB : No device found.' and NCCL falls back to TCP sockets (slow, not broken: a warning).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from envcheck.collectives.interface_rules import JUDGED, VARIABLES, describe, judge_variable, listing
from envcheck.core.check import CheckSpec, Context
from envcheck.core.errors import UsageError
from envcheck.core.result import FaultClass, Result, Status, failed, passed, warned
from envcheck.core.section import Section, require
from envcheck.probe.interfaces import infiniband, interfaces


def capture() -> dict[str, Any]:
    """The interfaces, the InfiniBand HCAs and the variables that select among them."""
    return {
        "interfaces": interfaces(),
        "infiniband": infiniband(),
        "env": {k: os.environ[k] for k in VARIABLES if k in os.environ},
    }


def validate(data: Any, where: str) -> None:
    """One-line UsageError unless `data` has the network section's shape."""
    require(data, where, {"interfaces": (list,), "infiniband": (list, None), "env": (dict,)})
    for key in ("interfaces", "env"):
        if key not in data:
            raise UsageError(f"{where} lacks {key!r}")
    for i, iface in enumerate(data["interfaces"]):
        require(
            iface,
            f"{where}.interfaces[{i}]",
            {"name": (str,), "flags": (int,), "ipv4": (list,), "ipv6": (list,)},
        )
        if "name" not in iface:
            raise UsageError(f"{where}.interfaces[{i}] lacks 'name'")
        for family in ("ipv4", "ipv6"):
            for j, address in enumerate(iface.get(family) or []):
                if not isinstance(address, str):
                    raise UsageError(
                        f"{where}.interfaces[{i}].{family}[{j}] must be str, got {address!r:.60}"
                    )
    for i, hca in enumerate(data.get("infiniband") or []):
        require(hca, f"{where}.infiniband[{i}]", {"name": (str,), "ports": (list,)})
        if "name" not in hca:
            raise UsageError(f"{where}.infiniband[{i}] lacks 'name'")
        for j, port in enumerate(hca.get("ports") or []):
            require(port, f"{where}.infiniband[{i}].ports[{j}]", {"port": (int,), "state": (str, None)})
            if "port" not in port:
                raise UsageError(f"{where}.infiniband[{i}].ports[{j}] lacks 'port'")
    for key, value in data["env"].items():
        if not isinstance(value, str):
            raise UsageError(f"{where}.env.{key} must be str, got {value!r:.60}")


def verdict(data: Mapping[str, Any], ctx: Context) -> Result:
    """FAIL (config) when a socket variable selects no interface this host has, naming those it has."""
    env: Mapping[str, str] = data.get("env", {})
    ifaces: list[Mapping[str, Any]] = list(data.get("interfaces", []))
    measured: dict[str, Any] = {"interfaces": [describe(i) for i in ifaces], "env": dict(env)}
    found = {var: judge_variable(var, env[var], data) for var in JUDGED if var in env}
    if not found:
        return passed(
            f"none of {', '.join(JUDGED)} is set: each library picks its interface itself; interfaces "
            f"here: {listing(ifaces)}",
            measured=measured,
        )
    measured["matches"] = {var: list(f.matches) for var, f in found.items()}
    bad = [f for f in found.values() if f.status is not Status.PASS]
    if not bad:
        return passed("; ".join(f.text for f in found.values()), measured=measured)
    summary, fix = "; ".join(f.text for f in bad), " | ".join(f.fix for f in bad if f.fix)
    make = failed if any(f.status is Status.FAIL for f in bad) else warned
    return make(summary, fix, measured=measured, fault_class=FaultClass.CONFIG)


SECTION = Section("network", "net.ifname", capture, validate, verdict)


def net_ifname(ctx: Context) -> Result:
    """The socket/HCA variables name interfaces this host has."""
    return SECTION.judge(ctx)


CHECKS = (
    CheckSpec(
        "net.ifname",
        net_ifname,
        "GLOO_/NCCL_/TP_SOCKET_IFNAME and NCCL_IB_HCA name interfaces that exist",
        isolated=False,
        timeout_s=5,
    ),
)
