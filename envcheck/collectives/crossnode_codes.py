"""The finding codes of the gate before a multi-node run's collectives, in one place (the look, the roll call, the
transport probe and the finding-code table all name them; each is in envcheck.cluster.finding_codes.TABLE)."""

from __future__ import annotations

NAME = "dist.rendezvous"  # the look and the roll call: everything up to every rank being in the store

MISSING_RANK = "dist.rendezvous.missing_rank"
UNRESOLVED = "dist.rendezvous.unresolved"
MASTER_ELSEWHERE = "dist.rendezvous.master_elsewhere"
PORT_TAKEN = "dist.rendezvous.port_taken"
PORT_BLOCKED = "dist.rendezvous.port_blocked"
INTERFACE = "dist.rendezvous.interface"
VERSIONS = "dist.rendezvous.versions"
CLOCK_SKEW = "dist.rendezvous.clock_skew"

TRANSPORT_LOOPBACK = "dist.transport.loopback"
TRANSPORT_NO_CARRIER = "dist.transport.no_carrier"
TRANSPORT_BLOCKED = "dist.transport.blocked"
TRANSPORT_NO_DATA = "dist.transport.no_data"
TRANSPORT_SLOW = "dist.transport.slow"
