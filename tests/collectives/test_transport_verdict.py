"""The transport probe's pure verdict (dist.transport) and gloo's connection rule; each cause is also built for real
in tests/cluster/test_multinode_transport.py."""

from __future__ import annotations

from typing import Any

from envcheck.collectives.transport_probe import initiates
from envcheck.collectives.transport_verdict import judge_transport
from envcheck.core.result import Status


def arrival(node: str, address: str, how: str = "its host name", **kw: Any) -> dict[str, Any]:
    view = {
        "backend": "gloo",
        "address": address,
        "how": how,
        "iface": "eth0",
        "carrier": True,
        "shaping": None,
    }
    return {"node": node, "look": {"transport": {**view, **kw}}}


def probe(n1: str, n2: str, outcome: dict[str, Any]) -> tuple[dict[int, Any], dict[int, Any]]:
    """n2 (rank 2) opened the connection to n1 (rank 0), as gloo's rule has it when n2's address is greater."""
    at = {0: {"node": "n1", "address": n1, "port": 40001}, 2: {"node": "n2", "address": n2, "port": 40002}}
    return at, {0: {}, 2: {"0": outcome}}


FAST = {"ok": True, "connect_s": 0.0002, "up_s": 0.002, "down_s": 0.0015, "bytes": 1 << 20}


def judge(arrivals: dict[int, Any], at: dict[int, Any], results: dict[int, Any]) -> Any:
    return judge_transport(arrivals, at, results, "gloo", "n1:29500", 0.4)


def test_gloo_lets_the_greater_address_open_each_connection() -> None:
    assert initiates(("10.77.0.12", 5), ("10.77.0.11", 9), "gloo")
    assert not initiates(("10.77.0.11", 9), ("10.77.0.12", 5), "gloo")
    assert initiates(("127.0.1.1", 5), ("10.77.0.11", 9), "gloo")  # loopback is greater than 10.x
    assert not initiates(("127.0.1.1", 5), ("192.168.0.2", 9), "gloo")  # and smaller than 192.168.x
    assert initiates(("127.0.1.1", 9), ("127.0.1.1", 5), "gloo")  # same address: the port decides
    assert initiates(("10.77.0.11", 9), ("10.77.0.12", 5), "nccl")  # NCCL connects both ways


def test_links_that_open_are_a_figure() -> None:
    arrivals = {0: arrival("n1", "10.77.0.11"), 2: arrival("n2", "10.77.0.12")}
    result = judge(arrivals, *probe("10.77.0.11", "10.77.0.12", FAST))
    assert result.status is Status.PASS and result.name == "dist.transport"
    assert result.summary == (
        "gloo's connections between nodes open: n2→n1 (10.77.0.12 → 10.77.0.11) connect 0.2 ms, 1 MiB 524/699 MB/s"
    )


def test_loopback_on_both_nodes_fails_naming_both() -> None:
    arrivals = {
        0: arrival("n1", "127.0.1.1", "its host name n1"),
        2: arrival("n2", "127.0.1.1", "its host name n2"),
    }
    refused = {"ok": False, "error": "connection refused", "connect_s": 0.4}
    result = judge(arrivals, *probe("127.0.1.1", "127.0.1.1", refused))
    assert result.status is Status.FAIL and result.code == "dist.transport.loopback"
    assert result.measured["nodes"] == ["n1", "n2"]
    assert (
        "n1's is 127.0.1.1, from its host name n1; n2's is 127.0.1.1, from its host name n2" in result.summary
    )


def test_loopback_on_the_connecting_node_only_warns() -> None:
    arrivals = {0: arrival("n1", "10.77.0.11"), 2: arrival("n2", "127.0.1.1", "its host name n2")}
    result = judge(arrivals, *probe("10.77.0.11", "127.0.1.1", FAST))
    assert result.status is Status.WARN and result.code == "dist.transport.loopback"
    assert result.measured["nodes"] == ["n2"] and "n2 opened every connection" in result.summary


def test_an_interface_without_carrier_is_named_before_a_firewall() -> None:
    arrivals = {
        0: arrival("n1", "10.78.0.11"),
        2: arrival("n2", "10.78.0.12", "GLOO_SOCKET_IFNAME=eth1", iface="eth1", carrier=False),
    }
    dropped = {"ok": False, "error": "no answer within 2s", "connect_s": 4.0}
    result = judge(arrivals, *probe("10.78.0.11", "10.78.0.12", dropped))
    assert result.status is Status.FAIL and result.code == "dist.transport.no_carrier"
    assert result.measured["nodes"] == [
        "n2"
    ] and "n2's eth1 (10.78.0.12, chosen by GLOO_SOCKET_IFNAME=eth1)" in (result.summary)


def test_a_dropped_connection_between_carrying_interfaces_is_a_firewall_on_the_listener() -> None:
    arrivals = {0: arrival("n1", "10.77.0.11"), 2: arrival("n2", "10.77.0.12")}
    dropped = {"ok": False, "error": "no answer within 2s", "connect_s": 4.0}
    result = judge(arrivals, *probe("10.77.0.11", "10.77.0.12", dropped))
    assert result.status is Status.FAIL and result.code == "dist.transport.blocked"
    assert result.measured["nodes"] == ["n1"] and "causes" not in result.measured
    assert "while every node reached the rendezvous store n1:29500" in result.summary


def test_a_connection_that_opens_but_moves_no_data_over_an_interface_without_carrier_names_the_carrier() -> (
    None
):
    """Seen in a CI run of tests/cluster/test_multinode_transport.py (n2's eth1 without carrier): the probe's connect
    went through after 3 s (by another way out of n2), then its data met "No route to host". The run's gloo ranks
    stalled at init, and dist.transport had passed."""
    arrivals = {
        0: arrival("n1", "10.78.0.11"),
        2: arrival("n2", "10.78.0.12", "GLOO_SOCKET_IFNAME=eth1", iface="eth1", carrier=False),
    }
    no_route = {"ok": True, "connect_s": 3.0525, "transfer_error": "No route to host"}
    result = judge(arrivals, *probe("10.78.0.11", "10.78.0.12", no_route))
    assert result.status is Status.FAIL and result.code == "dist.transport.no_carrier", result
    assert result.measured["nodes"] == ["n2"]
    assert result.summary.startswith(
        "n2 opened gloo's connection to n1 at 10.78.0.11:40001, but no data moved over it (No route to host): the "
        "interface gloo uses is up but has no carrier on n2's eth1"
    ), result.summary


def test_a_connection_that_opens_but_moves_no_data_between_carrying_interfaces_names_both_ends() -> None:
    arrivals = {0: arrival("n1", "10.77.0.11"), 2: arrival("n2", "10.77.0.12")}
    no_route = {"ok": True, "connect_s": 0.0003, "transfer_error": "No route to host", "stalled": False}
    result = judge(arrivals, *probe("10.77.0.11", "10.77.0.12", no_route))
    assert result.status is Status.FAIL and result.code == "dist.transport.no_data", result
    assert result.measured["nodes"] == ["n1", "n2"]
    assert result.summary == (
        "n2 opened gloo's connection to n1 at 10.77.0.11:40001, but no data moved over it (No route to host); the "
        "probe cannot tell where the data stopped"
    )
    assert result.remediation and "on n2: `ip route get 10.77.0.11`" in result.remediation


def test_data_that_only_stalled_is_a_warning_slow_and_dropped_look_alike() -> None:
    """A timeout on an open connection: a link too slow to move 1 MiB in the probe's 3 s stalls as a dropping one
    does; the backend is left to run."""
    arrivals = {0: arrival("n1", "10.77.0.11"), 2: arrival("n2", "10.77.0.12")}
    stalled = {"ok": True, "connect_s": 0.0003, "transfer_error": "no answer within 3s", "stalled": True}
    result = judge(arrivals, *probe("10.77.0.11", "10.77.0.12", stalled))
    assert result.status is Status.WARN and result.code == "dist.transport.no_data", result
    assert "or whether the link is only too slow to move 1 MiB in time" in result.summary


def test_a_loopback_node_that_opened_a_connection_which_moved_no_data_is_not_blamed_on_its_loopback() -> None:
    """n2's address is loopback, and gloo lets it open the connection (a warning on its own); its connect reached
    n1's real address, so the loopback address explains nothing about data that then did not move."""
    arrivals = {0: arrival("n1", "10.77.0.11"), 2: arrival("n2", "127.0.1.1", "its host name n2")}
    reset = {"ok": True, "connect_s": 0.0003, "transfer_error": "Connection reset by peer", "stalled": False}
    result = judge(arrivals, *probe("10.77.0.11", "127.0.1.1", reset))
    assert result.code == "dist.transport.no_data", result


def test_the_node_at_every_silent_connection_is_the_one_named() -> None:
    """NCCL connects both ways: n2 moved no data with n1 nor n3, while n1 and n3 did with each other."""
    arrivals = {
        0: arrival("n1", "10.77.0.11"),
        2: arrival("n2", "10.77.0.12"),
        4: arrival("n3", "10.77.0.13"),
    }
    at = {
        0: {"node": "n1", "address": "10.77.0.11", "port": 40001},
        2: {"node": "n2", "address": "10.77.0.12", "port": 40002},
        4: {"node": "n3", "address": "10.77.0.13", "port": 40003},
    }
    reset = {"ok": True, "connect_s": 0.0003, "transfer_error": "Connection reset by peer", "stalled": False}
    results = {0: {"2": reset, "4": FAST}, 2: {"0": reset, "4": reset}, 4: {"0": FAST, "2": reset}}
    result = judge_transport(arrivals, at, results, "nccl", "n1:29500", 0.4)
    assert result.status is Status.FAIL and result.code == "dist.transport.no_data", result
    assert result.measured["nodes"] == ["n2"], result.measured


def test_a_slow_direction_is_a_warning_naming_the_shaped_node() -> None:
    tbf = {"kind": "tbf", "options": {"rate": 6250000, "burst": 4093, "lat": 50000}}
    arrivals = {0: arrival("n1", "10.77.0.11"), 2: arrival("n2", "10.77.0.12", shaping=tbf)}
    slow = {**FAST, "up_s": 0.17}  # n2 -> n1 at 6 MB/s, n1 -> n2 at 700 MB/s
    result = judge(arrivals, *probe("10.77.0.11", "10.77.0.12", slow))
    assert result.status is Status.WARN and result.code == "dist.transport.slow"
    assert result.measured["nodes"] == ["n2"] and result.measured["slow"] == [
        {"from": "n2", "to": "n1", "MBps": 6.17}
    ]
    assert "n2's eth0 is shaped by tc (tbf rate 50 Mbit/s)" in result.summary


def test_a_slow_direction_without_shaping_names_its_sender() -> None:
    arrivals = {0: arrival("n1", "10.77.0.11"), 2: arrival("n2", "10.77.0.12")}
    result = judge(arrivals, *probe("10.77.0.11", "10.77.0.12", {**FAST, "down_s": 0.4}))
    assert result.status is Status.WARN and result.measured["nodes"] == ["n1"], result.summary


def test_a_short_pause_on_a_fast_link_is_not_slow() -> None:
    arrivals = {0: arrival("n1", "10.77.0.11"), 2: arrival("n2", "10.77.0.12")}
    result = judge(arrivals, *probe("10.77.0.11", "10.77.0.12", {**FAST, "up_s": 0.05}))  # 20 MB/s, but 50 ms
    assert result.status is Status.PASS, result.summary


def test_a_large_job_probes_each_nodes_neighbours_not_every_pair() -> None:
    from envcheck.collectives.transport_probe import neighbours

    small = list(range(0, 16 * 8, 8))  # 16 nodes, 8 ranks each: every pair
    assert neighbours(0, small) == set(small) - {0}
    large = list(range(0, 64 * 8, 8))
    assert neighbours(0, large) == {8, 16, 64 * 8 - 8, 64 * 8 - 16}
    assert all(len(neighbours(r, large)) == 4 for r in large)
