"""Who holds a TCP port on this node: the listening sockets of /proc/net/tcp and /proc/net/tcp6 (this network
namespace's tables, as `ss -ltn` reads them), and the processes whose /proc/PID/fd links name each socket's inode
(`socket:[INODE]`, as `ss -p` and `fuser` find them). Readers only, no verdicts.

A process of another user, or outside this PID namespace (another container), holds a socket we cannot map to a
pid: the uid column of the table still says whose it is.
"""

from __future__ import annotations

import os
import socket
from dataclasses import asdict, dataclass
from typing import Any

TABLES = ("/proc/net/tcp", "/proc/net/tcp6")
LISTEN = "0A"  # the kernel's TCP_LISTEN state, as the `st` column writes it
COMMAND_CHARS = 160


@dataclass(frozen=True)
class Holder:
    """One listening socket on the port: where it listens, whose it is, and the process holding it if visible."""

    address: str
    uid: int
    inode: int
    pid: int | None = None
    command: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _address(text: str) -> str:
    """The kernel's hex address (each 32-bit word in host order) as an IP address."""
    raw = bytes.fromhex(text)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return socket.inet_ntop(socket.AF_INET if len(words) == 4 else socket.AF_INET6, words)


def listening(port: int, tables: tuple[str, ...] = TABLES) -> list[tuple[str, int, int]]:
    """(address, uid, inode) of every socket listening on TCP `port` in this network namespace."""
    found = []
    for table in tables:
        try:
            with open(table, encoding="ascii", errors="replace") as f:
                lines = f.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != LISTEN:
                continue
            local, _, hex_port = fields[1].rpartition(":")
            try:
                if int(hex_port, 16) != port:
                    continue
                found.append((_address(local), int(fields[7]), int(fields[9])))
            except ValueError:
                continue
    return found


def _command(pid: str, proc: str) -> str | None:
    try:
        with open(f"{proc}/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return None
    text = " ".join(a.decode(errors="replace") for a in argv if a)
    return "".join(ch if ch.isprintable() else "?" for ch in text)[:COMMAND_CHARS] or None


def owners(inodes: set[int], proc: str = "/proc") -> dict[int, tuple[int, str | None]]:
    """inode -> (pid, command) for the sockets in `inodes` this user may see in /proc/*/fd."""
    wanted = {f"socket:[{inode}]": inode for inode in inodes}
    found: dict[int, tuple[int, str | None]] = {}
    try:
        pids = [p for p in os.listdir(proc) if p.isdigit()]
    except OSError:
        return found
    for pid in pids:
        try:
            fds = os.listdir(f"{proc}/{pid}/fd")
        except OSError:  # another user's process, or it exited while we looked
            continue
        for fd in fds:
            try:
                link = os.readlink(f"{proc}/{pid}/fd/{fd}")
            except OSError:
                continue
            inode = wanted.get(link)
            if inode is not None and inode not in found:
                found[inode] = (int(pid), _command(pid, proc))
        if len(found) == len(wanted):
            break
    return found


def holders(port: int) -> list[Holder]:
    """Every listening socket on `port` here, with the process holding it where this user can see it."""
    sockets = listening(port)
    mapped = owners({inode for _, _, inode in sockets})
    out = []
    for address, uid, inode in sockets:
        pid, command = mapped.get(inode, (None, None))
        out.append(Holder(address, uid, inode, pid, command))
    return out


def describe(found: list[Holder]) -> str:
    """E.g. `pid 6406 (python3 -c ...) of uid 0, listening on 0.0.0.0`; or why the process is not named."""
    parts = []
    for h in found[:3]:
        if h.pid is not None:
            parts.append(f"pid {h.pid} ({h.command or '?'}) of uid {h.uid}, listening on {h.address}")
        else:
            parts.append(
                f"a socket of uid {h.uid} listening on {h.address} (its process is not visible to this user: "
                "another user's, or outside this container)"
            )
    return "; ".join(parts)
