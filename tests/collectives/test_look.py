"""What a rank sees alone before the store (envcheck.collectives.look, envcheck.collectives.transport), on this
machine's real sockets, resolver and interfaces; the per-node cases run for real in tests/cluster."""

from __future__ import annotations

import os
import socket

from envcheck.collectives.look import Look, is_here, own_problem, plain, port_check
from envcheck.collectives.transport import carrier, gloo_address, is_loopback, nccl_address
from envcheck.probe.interfaces import IFF_LOOPBACK, IFF_LOWER_UP, IFF_RUNNING, IFF_UP, interfaces
from tests.helpers.ports import free_port

UP = IFF_UP | IFF_RUNNING | IFF_LOWER_UP


def test_addresses_of_this_node_and_loopback() -> None:
    assert plain("::ffff:10.77.0.11") == "10.77.0.11" and plain("fe80::1%eth0") == "fe80::1"
    assert is_loopback("127.0.1.1") and is_loopback("::1") and is_loopback("::ffff:127.0.0.1")
    assert not is_loopback("10.77.0.11") and not is_loopback(None) and not is_loopback("n1")
    assert is_here(["::ffff:10.77.0.11"], {"10.77.0.11"}) and is_here(["127.0.1.1"], set())
    assert not is_here(["10.77.0.12"], {"10.77.0.11"})


def test_the_port_free_or_held_by_this_process() -> None:
    # a port below the ephemeral range: once closed, no connection or bind to port 0 beside the test takes it
    port = free_port("0.0.0.0")
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("0.0.0.0", port))
        sock.listen()
        held = port_check(port, ["127.0.0.1"])
    assert held["state"] == "held" and held["holders"][0]["pid"] == os.getpid(), held
    assert port_check(port, ["127.0.0.1"]) == {
        "state": "free"
    }  # closed: bound, listened on, reached from here


def look(**kw: object) -> Look:
    base = Look(rank=1, node="n2", name="n1", port=29500, addresses=["10.77.0.11"], rank0_node="n1")
    for key, value in kw.items():
        setattr(base, key, value)
    return base


def test_the_cause_a_rank_names_alone() -> None:
    assert own_problem(look(), hosting=False) is None
    unresolved = own_problem(
        look(addresses=[], resolve_error="gaierror: [Errno -2] Name or service not known"), False
    )
    assert unresolved == {
        "code": "dist.rendezvous.unresolved",
        "text": "MASTER_ADDR 'n1' does not resolve on n2 (gaierror: [Errno -2] Name or service not known)",
    }
    itself = own_problem(look(name="n2", addresses=["10.77.0.12"], local=True), False)
    assert itself is not None and itself["code"] == "dist.rendezvous.master_elsewhere"
    assert itself["text"].endswith("which is n2 itself, but rank 0 runs on n1 (Slurm's step layout)")
    hosting = own_problem(look(rank=0, node="n1", name="n2", addresses=["10.77.0.12"], local=False), True)
    assert hosting is not None and hosting["code"] == "dist.rendezvous.master_elsewhere"
    skew = own_problem(look(clock={"offset_s": -20.0}), False)
    assert skew == {
        "code": "dist.rendezvous.clock_skew",
        "text": "n2's clock is 20.0s behind the Slurm controller's",
    }


def test_gloos_address_from_its_variable_its_host_name_or_loopback() -> None:
    ifaces = interfaces()
    assert gloo_address({"GLOO_SOCKET_IFNAME": "lo"}, ifaces, "ignored")["address"] == "127.0.0.1"
    named = gloo_address({}, ifaces, "localhost")  # resolves (/etc/hosts) and binds here
    assert named["address"] in ("127.0.0.1", "::1") and named["how"] == "its host name localhost"
    fallback = gloo_address({}, ifaces, "no-such-host.invalid")
    assert fallback["address"] == "127.0.0.1" and fallback["how"].startswith("torch's loopback fallback")


def test_nccls_address_in_its_own_order() -> None:
    ifaces = [
        {"name": "lo", "flags": UP | IFF_LOOPBACK, "ipv4": ["127.0.0.1"], "ipv6": []},
        {"name": "docker0", "flags": UP, "ipv4": ["172.17.0.1"], "ipv6": []},
        {"name": "eth0", "flags": UP, "ipv4": ["10.0.0.5"], "ipv6": []},
        {"name": "ib0", "flags": UP, "ipv4": ["192.168.1.5"], "ipv6": []},
    ]
    assert nccl_address({}, ifaces)["address"] == "192.168.1.5"  # ib* first
    assert nccl_address({}, ifaces[:3])["address"] == "10.0.0.5"  # then anything but docker and lo
    assert nccl_address({"NCCL_SOCKET_IFNAME": "^eth,ib"}, ifaces)["address"] == "127.0.0.1"
    assert nccl_address({"NCCL_SOCKET_IFNAME": "ens"}, ifaces)["address"] is None


def test_carrier_from_the_netlink_flags() -> None:
    assert carrier({"flags": UP}) is True
    assert carrier({"flags": IFF_UP}) is False  # up, NO-CARRIER (ip link's word)
    assert carrier({"flags": 0}) is None  # down: carrier says nothing
