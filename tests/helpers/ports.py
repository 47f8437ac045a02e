"""A free TCP port on 127.0.0.1 for a server that a test starts afterwards (a published container port, a registry,
Prometheus, slurmctld, a rendezvous store).

The port comes from below the kernel's ephemeral range (net.ipv4.ip_local_port_range), not from a bind to port 0.
The kernel hands out ports of that range to every bind to port 0 and every outgoing connection on the machine: a
port it gave here, closed, and bound again seconds later by the server, could be taken in between by anything
running beside the test (srun's and slurmstepd's I/O ports, gloo's and a TCP store's listeners, another stream's
client). Below the range, only an explicit bind to that number takes it, so the band also stops below the ports bound
explicitly beside the tests: envcheck's own Slurm rendezvous port (20000 plus the job's seed, the MASTER_PORT of
envcheck.probe.slurm_env) and torch's defaults (29400, 29500). The port is free when chosen (it binds), and one
process is never handed the same port twice (a Slurm cluster's two daemons ask one after the other).
"""

from __future__ import annotations

import random
import socket

EPHEMERAL_DEFAULT = (32768, 60999)  # Linux's default ip_local_port_range
BAND = (10000, 20000)  # above the ports services are configured with by default (8080, 8888, 9090, 9100, ...)
# Not the `random` module's state: a test may seed it, and two streams seeded alike would draw the same ports.
_draw = random.SystemRandom()
_handed: set[int] = set()


def ephemeral_range(path: str = "/proc/sys/net/ipv4/ip_local_port_range") -> tuple[int, int]:
    """The kernel's ephemeral port range, or Linux's default where it cannot be read."""
    try:
        with open(path, encoding="ascii") as handle:
            low, high = (int(part) for part in handle.read().split())
    except (OSError, ValueError):
        return EPHEMERAL_DEFAULT
    return low, high


def band_top() -> int:
    """Where the band ends: BAND's end, or the ephemeral range's start where that is lower."""
    return min(BAND[1], ephemeral_range()[0])


def free_port(host: str = "127.0.0.1") -> int:
    """A port on `host` that binds now and was not handed out before in this process, from the band below the
    ephemeral range; where the range starts too low to leave one, a port the kernel picks."""
    top = band_top()
    if top - BAND[0] >= 1000:
        for _ in range(100):
            port = _draw.randrange(BAND[0], top)
            if port in _handed:
                continue
            with socket.socket() as sock:
                try:
                    sock.bind((host, port))
                except OSError:  # in use (or in TIME_WAIT): another
                    continue
            _handed.add(port)
            return port
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
