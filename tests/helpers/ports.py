"""A free TCP port on 127.0.0.1 for a server that a test starts afterwards (a published container port, a registry,
Prometheus, slurmctld, a rendezvous store).

The port comes from below the kernel's ephemeral range (net.ipv4.ip_local_port_range), not from a bind to port 0.
The kernel hands out ports of that range to every bind to port 0 and every outgoing connection on the machine: a
port it gave here, closed, and bound again seconds later by the server, could be taken in between by anything
running beside the test (srun's and slurmstepd's I/O ports, gloo's and a TCP store's listeners, another stream's
client). Below the range, only an explicit bind to that number takes it. The port is free when chosen: it binds.
"""

from __future__ import annotations

import random
import socket

EPHEMERAL_DEFAULT = (32768, 60999)  # Linux's default ip_local_port_range
FLOOR = 20000  # above the ports services are configured with by default (8080, 8888, 9090, 9100, ...)
_draw = (
    random.SystemRandom()
)  # not the `random` module's state, which a test may seed (two streams, one sequence)


def ephemeral_range(path: str = "/proc/sys/net/ipv4/ip_local_port_range") -> tuple[int, int]:
    """The kernel's ephemeral port range, or Linux's default where it cannot be read."""
    try:
        with open(path, encoding="ascii") as handle:
            low, high = (int(part) for part in handle.read().split())
    except (OSError, ValueError):
        return EPHEMERAL_DEFAULT
    return low, high


def free_port(host: str = "127.0.0.1") -> int:
    """A port on `host` that binds now, from [FLOOR, the ephemeral range's start); where the range starts too low
    for that, one the kernel picks."""
    low, _ = ephemeral_range()
    if low - FLOOR >= 1000:
        for _ in range(100):
            port = _draw.randrange(FLOOR, low)
            with socket.socket() as sock:
                try:
                    sock.bind((host, port))
                except OSError:  # in use (or in TIME_WAIT): another
                    continue
                return port
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
