"""NVIDIA's node daemons, alive or not, from direct evidence: a process of that name (in this PID namespace), or its
socket accepting a connection. A socket file on its own is no evidence: it outlives a daemon killed without cleanup
(connect(2) then fails with ECONNREFUSED), and a container may be given the socket of a daemon whose process it
cannot see (the container toolkit mounts nvidia-persistenced's socket: libnvidia-container, nvc_mount.c)."""

from __future__ import annotations

import errno
import os
import socket
from dataclasses import dataclass
from typing import Any

from envcheck.probe.system import host_pid_namespace


@dataclass(frozen=True)
class Daemon:
    """A daemon as it shows on a node: its executable's names and the UNIX sockets it listens on."""

    name: str
    executables: tuple[str, ...]
    sockets: tuple[str, ...] = ()


# nvidia-persistenced --help: "/var/run/nvidia-persistenced/socket" (/var/run is /run on current distributions).
PERSISTENCED = Daemon(
    "nvidia-persistenced",
    ("nvidia-persistenced",),
    ("/run/nvidia-persistenced/socket", "/var/run/nvidia-persistenced/socket"),
)
HOSTENGINE = Daemon(
    "nv-hostengine", ("nv-hostengine",)
)  # DCGM's host engine (TCP 5555 or a UNIX socket by flag)
FABRIC_MANAGER = Daemon(
    "nvidia-fabricmanager", ("nv-fabricmanager",)
)  # the package's service runs nv-fabricmanager
IMEX = Daemon("nvidia-imex", ("nvidia-imex",))
TRACKED = (PERSISTENCED, HOSTENGINE, FABRIC_MANAGER, IMEX)


def _executable(pid: str, proc: str) -> str | None:
    """The basename of a process's argv[0] (its comm is cut at 15 characters: 'nvidia-persiste')."""
    try:
        with open(os.path.join(proc, pid, "cmdline"), "rb") as f:
            argv0 = f.read(4096).split(b"\0", 1)[0]
    except OSError:
        return None
    return os.path.basename(argv0.decode(errors="replace")) or None


def processes(names: tuple[str, ...], proc: str = "/proc") -> list[int]:
    """PIDs of the processes in this PID namespace whose executable is one of `names`."""
    try:
        entries = os.listdir(proc)
    except OSError:
        return []
    return sorted(int(p) for p in entries if p.isdigit() and _executable(p, proc) in names)


def socket_state(path: str, timeout_s: float = 1.0) -> str:
    """'accepts', 'refused' (a file no daemon listens on), 'absent', or the errno name connect(2) failed with."""
    if not os.path.exists(path):
        return "absent"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout_s)
        try:
            s.connect(path)
        except ConnectionRefusedError:
            return "refused"
        except TimeoutError:
            return "timeout"
        except OSError as exc:
            return errno.errorcode.get(exc.errno or 0, str(exc))
    return "accepts"


def daemon_state(daemon: Daemon, proc: str = "/proc") -> dict[str, Any]:
    """What shows of `daemon`: `pids` (None when this process cannot see the host's processes and none is in its own
    namespace), `sockets` (path -> state) and `alive`: True, False, or None when nothing here can tell."""
    pids = processes(daemon.executables, proc)
    sockets = {p: socket_state(p) for p in daemon.sockets}
    states = set(sockets.values())
    alive: bool | None
    if pids or "accepts" in states:
        alive = True
    elif "refused" in states or host_pid_namespace():
        alive = False  # a dead daemon's socket, or the host's processes are visible and none is it
    else:
        alive = None
    return {"pids": pids or (None if alive is None else []), "sockets": sockets, "alive": alive}


def daemons(proc: str = "/proc") -> dict[str, dict[str, Any]]:
    """Every tracked daemon's state, by name."""
    return {d.name: daemon_state(d, proc) for d in TRACKED}
