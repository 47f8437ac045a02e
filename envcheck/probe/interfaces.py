"""The host's network interfaces (getifaddrs through libc: names, flags, addresses) and InfiniBand HCAs
(/sys/class/infiniband): what NCCL, gloo and TensorPipe choose among. Readers only, no verdicts."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import socket
from typing import Any

from envcheck.probe.system import read_text


class _Ifaddrs(ctypes.Structure):
    pass


_Ifaddrs._fields_ = [
    ("next", ctypes.POINTER(_Ifaddrs)),
    ("name", ctypes.c_char_p),
    ("flags", ctypes.c_uint),
    ("addr", ctypes.c_void_p),
    ("netmask", ctypes.c_void_p),
    ("ifu", ctypes.c_void_p),
    ("data", ctypes.c_void_p),
]

IFF_UP, IFF_LOOPBACK, IFF_RUNNING, IFF_LOWER_UP = 0x1, 0x8, 0x40, 0x10000  # linux/if.h


def interfaces() -> list[dict[str, Any]]:
    """Every interface getifaddrs(3) reports (alias labels such as eth0:1 included): name, flags, addresses."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    head = ctypes.POINTER(_Ifaddrs)()
    if libc.getifaddrs(ctypes.byref(head)) != 0:
        raise OSError(ctypes.get_errno(), f"getifaddrs: {os.strerror(ctypes.get_errno())}")
    found: dict[str, dict[str, Any]] = {
        name: {"name": name, "flags": 0, "ipv4": [], "ipv6": []} for _, name in socket.if_nameindex()
    }
    try:
        node = head
        while node:
            entry = node.contents
            name = (entry.name or b"").decode(errors="replace")
            iface = found.setdefault(name, {"name": name, "flags": 0, "ipv4": [], "ipv6": []})
            iface["flags"] |= int(entry.flags)
            if entry.addr:
                family = ctypes.c_ushort.from_address(entry.addr).value
                if family == socket.AF_INET:  # sockaddr_in: family, port, then 4 address bytes
                    iface["ipv4"].append(socket.inet_ntop(family, ctypes.string_at(entry.addr + 4, 4)))
                elif family == socket.AF_INET6:  # sockaddr_in6: family, port, flowinfo, then 16 bytes
                    iface["ipv6"].append(socket.inet_ntop(family, ctypes.string_at(entry.addr + 8, 16)))
            node = entry.next
    finally:
        libc.freeifaddrs(head)
    return list(found.values())


def infiniband(root: str = "/sys/class/infiniband") -> list[dict[str, Any]] | None:
    """Each HCA with its ports' states (e.g. ACTIVE, DOWN); None when the host shows no InfiniBand class."""
    if not os.path.isdir(root):
        return None
    hcas = []
    for name in sorted(os.listdir(root)):
        ports_dir = os.path.join(root, name, "ports")
        numbers = (
            sorted(int(p) for p in os.listdir(ports_dir) if p.isdigit()) if os.path.isdir(ports_dir) else []
        )
        ports = [
            {"port": n, "state": (read_text(f"{ports_dir}/{n}/state") or "").rpartition(":")[2].strip()}
            for n in numbers
        ]
        hcas.append({"name": name, "ports": ports})
    return hcas
