"""The roll call's pure verdict (dist.rendezvous): each cause from its own evidence, no other cause claimed, and a
clean roll call; every cause is also built for real in tests/cluster/test_multinode_faults.py."""

from __future__ import annotations

from typing import Any

from envcheck.collectives.crossnode import SKEW_FAIL_S, SKEW_WARN_S, judge_roll_call, port_result
from envcheck.core.result import Status

V = {"torch": "2.13.0", "nccl": None, "envcheck": "0.1.0", "python": "3.11.2"}
ADDR = {"n1": "10.77.0.11", "n2": "10.77.0.12", "n3": "10.77.0.13"}


def look(node: str, rank: int = 0, **kw: Any) -> dict[str, Any]:
    """A rank's look as it travels in its arrival (envcheck.collectives.look.Look.as_dict)."""
    base: dict[str, Any] = {
        "rank": rank,
        "node": node,
        "name": "n1",
        "port": 29500,
        "addresses": ["10.77.0.11"],
        "resolve_error": None,
        "local": node == "n1",
        "own": [ADDR[node]],
        "rank0_node": "n1",
        "rank0_addr": "10.77.0.11",
        "port_state": {"state": "free"} if rank == 0 else None,
        "interfaces": [],
        "clock": None,
        "transport": {},
        "problem": None,
    }
    return {**base, **kw}


def arrival(
    rank: int, node: str, t: float = 100.0, reach: dict[str, Any] | None = None, **kw: Any
) -> dict[str, Any]:
    return {
        "rank": rank,
        "node": node,
        "versions": dict(V),
        "look": look(node, rank, **kw),
        "reach": reach,
        "time": t,
    }


def judge(
    world: int, arrivals: dict[int, dict[str, Any]], master: dict[str, Any] | None = None, **kw: Any
) -> Any:
    master = master or arrivals[0]["look"]
    return judge_roll_call(
        world, arrivals, master, kw.pop("layout", None), kw.pop("waited", 1.0), kw.pop("seen", {}), **kw
    )


def test_clean_roll_call_is_no_result() -> None:
    assert judge(2, {0: arrival(0, "n1"), 1: arrival(1, "n2")}, seen={0: 100.0, 1: 100.0}) is None


def test_missing_rank_comes_first_and_names_its_node() -> None:
    arrivals = {0: arrival(0, "n1"), 1: arrival(1, "n2")}
    arrivals[1]["versions"] = {**V, "torch": "2.12.0"}
    result = judge(6, arrivals, layout=["n1", "n2", "n3", "n3", "n3", "n3"], waited=12.0, timeout_s=12.0)
    assert result is not None and result.status is Status.FAIL and result.name == "dist.rendezvous"
    assert result.summary.startswith(
        "rank 2 (on n3), rank 3 (on n3), rank 4 (on n3), rank 5 (on n3) never reached "
        "the rendezvous store n1:29500 (rank 0 waited 12s of --timeout 12s)"
    )
    assert result.code == "dist.rendezvous.missing_rank"
    assert result.measured["causes"] == ["dist.rendezvous.missing_rank", "dist.rendezvous.versions"]
    assert result.summary.endswith("versions differ across nodes: torch 2.13.0 on n1, 2.12.0 on n2")


def view(
    node: str, tasks: list[dict[str, Any]], connect: dict[str, str | None] | None = None
) -> dict[str, Any]:
    """Slurm's look on a node (envcheck.collectives.absent.NodeView.as_dict, remote_look's answer inside)."""
    seen = {
        "node": node,
        "tasks": tasks,
        "resolve": {},
        "connect": connect or {"10.77.0.11": None},
        "witness": {},
    }
    return {"node": node, "view": seen, "error": None, "state": None}


def task(rank: int, command: str, **kw: Any) -> dict[str, Any]:
    return {
        "rank": rank,
        "pid": 4242,
        "ppid": 1,
        "state": "S",
        "age_s": 12.5,
        "command": command,
        "leaf": True,
        "envcheck": "envcheck.distributed" in command,
        "torch_loaded": None,
        **kw,
    }


def test_a_missing_rank_with_slurms_view_of_its_task() -> None:
    arrivals = {0: arrival(0, "n1")}
    ran = judge(
        2, arrivals, layout=["n1", "n2"], views={"n2": view("n2", [task(1, "sleep 60")])}, timeout_s=12.0
    )
    assert "its task is running `sleep 60` (pid 4242, for 12.5s)" in ran.summary, ran.summary
    ended = judge(2, arrivals, layout=["n1", "n2"], views={"n2": view("n2", [])}, timeout_s=12.0)
    assert (
        "finds no process of rank 1 in this step: its task ended before it reached the store" in ended.summary
    )
    stuck = judge(
        2,
        arrivals,
        layout=["n1", "n2"],
        timeout_s=12.0,
        views={"n2": view("n2", [task(1, "python -m envcheck.distributed", torch_loaded=False)])},
    )
    assert "still importing torch (libtorch not mapped yet)" in stuck.summary, stuck.summary
    for result in (ran, ended, stuck):
        assert result.code == "dist.rendezvous.missing_rank" and "causes" not in result.measured


def test_a_node_cut_off_from_the_port_is_a_firewall_not_a_missing_rank() -> None:
    cut = view("n2", [task(1, "python -m envcheck.distributed")], {"10.77.0.11": "no answer within 2s"})
    cut["view"]["witness"] = {"port": 6818, "errors": {"10.77.0.11": None}}
    result = judge(2, {0: arrival(0, "n1")}, layout=["n1", "n2"], views={"n2": cut}, timeout_s=12.0)
    assert result.code == "dist.rendezvous.port_blocked" and "causes" not in result.measured, result
    assert result.summary.startswith(
        "rank 1 (on n2) never reached the rendezvous store: n2 cannot connect to the rendezvous port 29500 on n1"
    ), result.summary
    assert "10.77.0.11 answers on slurmd's port 6818" in result.summary


def test_a_refusal_before_rank_0_listened_is_no_firewall() -> None:
    # rank 1 reached rank 0's node through Slurm's address after being refused there while rank 0 was starting
    reach = {
        "addresses": [],
        "via_fallback": True,
        "address": "10.77.0.11",
        "tried": {"10.77.0.11": "refused"},
    }
    arrivals = {
        0: arrival(0, "n1", addresses=[], resolve_error="gaierror"),
        1: arrival(1, "n2", reach=reach, addresses=[], resolve_error="gaierror"),
    }
    result = judge(2, arrivals)
    assert result.code == "dist.rendezvous.unresolved" and "causes" not in result.measured, result
    assert result.summary.startswith("MASTER_ADDR 'n1' does not resolve on n1, n2 (gaierror) (rank 0's node)")


def test_a_stale_address_on_one_node() -> None:
    reach = {
        "addresses": ["10.77.0.99"],
        "via_fallback": True,
        "address": "10.77.0.11",
        "tried": {"10.77.0.99": "no answer within 2s"},
    }
    arrivals = {0: arrival(0, "n1"), 1: arrival(1, "n2", reach=reach, addresses=["10.77.0.99"])}
    result = judge(2, arrivals)
    assert result.code == "dist.rendezvous.unresolved" and result.measured["nodes"] == ["n2"]
    assert "resolves to a stale address on n2 (10.77.0.99), not to n1" in result.summary


def test_a_name_that_is_not_rank_0s_node() -> None:
    said = {"code": "dist.rendezvous.master_elsewhere", "text": "..."}
    arrivals = {
        0: arrival(
            0, "n1", name="n2", addresses=["10.77.0.12", "::ffff:10.77.0.12"], local=False, problem=said
        ),
        1: arrival(1, "n2", name="n2", addresses=["10.77.0.12"], local=True, problem=said),
    }
    result = judge(2, arrivals)
    assert result.code == "dist.rendezvous.master_elsewhere" and result.fault_class.value == "config"
    assert result.summary.startswith("MASTER_ADDR 'n2' resolves to 10.77.0.12 (n2 itself), not to n1"), result


def test_the_port_held_and_the_port_filtered_on_rank_0s_node() -> None:
    holder = {
        "address": "0.0.0.0",
        "uid": 0,
        "inode": 7,
        "pid": 6406,
        "command": "python3 -m http.server 29500",
    }
    held = port_result(look("n1", port_state={"state": "held", "holders": [holder]}))
    assert (
        held is not None and held.code == "dist.rendezvous.port_taken" and held.fault_class.value == "config"
    )
    assert held.summary.startswith(
        "the rendezvous port 29500 on n1 is already held by pid 6406 (python3 -m http"
    )
    assert "kill 6406" in (held.remediation or "")
    blocked = port_result(
        look("n1", port_state={"state": "blocked", "target": "127.0.0.1", "why": "refused"})
    )
    assert blocked is not None and blocked.code == "dist.rendezvous.port_blocked"
    assert port_result(look("n1")) is None


def problem(var: str, value: str, status: str, used: bool) -> dict[str, Any]:
    return {
        "var": var,
        "value": value,
        "status": status,
        "used": used,
        "text": f"{var}={value}: 'ib0' does not exist; interfaces here: eth0 (10.77.0.12)",
        "fix": f"export {var}=eth0 (an interface that exists here)",
    }


def test_an_interface_variable_fails_only_for_the_backend_that_reads_it() -> None:
    used = {
        0: arrival(0, "n1"),
        1: arrival(1, "n2", interfaces=[problem("GLOO_SOCKET_IFNAME", "ib0", "fail", True)]),
    }
    fail = judge(2, used)
    assert fail.status is Status.FAIL and fail.code == "dist.rendezvous.interface"
    assert fail.summary == (
        "GLOO_SOCKET_IFNAME=ib0 names no usable interface on n2: 'ib0' does not exist; "
        "interfaces here: eth0 (10.77.0.12)"
    )
    other = {
        0: arrival(0, "n1"),
        1: arrival(1, "n2", interfaces=[problem("NCCL_SOCKET_IFNAME", "ib0", "fail", False)]),
    }
    warn = judge(2, other)
    assert warn.status is Status.WARN and warn.code == "dist.rendezvous.interface"
    assert "this run's backend does not read it" in warn.summary


def clocked(node: str, rank: int, offset: float) -> dict[str, Any]:
    return arrival(rank, node, clock={"offset_s": offset, "round_trip_s": 0.05})


def test_clock_skew_is_judged_against_the_slurm_controller() -> None:
    rank0_off = judge(2, {0: clocked("n1", 0, 40.2), 1: clocked("n2", 1, 0.3)})
    assert rank0_off.status is Status.FAIL and rank0_off.code == "dist.rendezvous.clock_skew"
    assert rank0_off.measured["nodes"] == ["n1"] and rank0_off.measured["reference"] == "slurmctld"
    assert rank0_off.summary.startswith(
        "n1's clock is 40.2s ahead of the Slurm controller's (n2: within 0.3s)"
    )
    small = judge(2, {0: clocked("n1", 0, 0.4), 1: clocked("n2", 1, SKEW_WARN_S + 1)})
    assert small.status is Status.WARN and small.measured["nodes"] == ["n2"]
    controller = judge(2, {0: clocked("n1", 0, 30.0), 1: clocked("n2", 1, 30.5)})
    assert controller.status is Status.WARN and controller.measured["nodes"] == ["slurmctld"], (
        controller.summary
    )
    assert judge(2, {0: clocked("n1", 0, 0.4), 1: clocked("n2", 1, -0.6)}) is None


def test_clock_skew_without_slurm_says_either_node_may_be_wrong() -> None:
    arrivals = {0: arrival(0, "n1"), 1: arrival(1, "n2", t=100.0 - SKEW_FAIL_S - 1)}
    fail = judge(2, arrivals, seen={0: 100.0, 1: 100.0})
    assert (
        fail.status is Status.FAIL and "16.0s behind n1's (rank 0; with no independent clock" in fail.summary
    )


def test_a_rank_still_starting_when_rank_0_stopped_early_is_not_blamed() -> None:
    # Rank 0 stopped a few seconds after another cause was known: a rank Slurm shows still running envcheck may
    # only have been slow to import torch; a rank whose task is gone is named.
    said = [problem("GLOO_SOCKET_IFNAME", "ib0", "fail", True)]
    arrivals = {0: arrival(0, "n1"), 1: arrival(1, "n2", interfaces=said)}
    starting = {"n3": view("n3", [task(2, "python -m envcheck.distributed")])}
    result = judge(3, arrivals, layout=["n1", "n2", "n3"], views=starting, cut_short=True, timeout_s=12.0)
    assert result.code == "dist.rendezvous.interface" and "causes" not in result.measured, result
    ended = judge(3, arrivals, layout=["n1", "n2", "n3"], views={"n3": view("n3", [])}, cut_short=True)
    assert ended.measured["causes"] == ["dist.rendezvous.missing_rank", "dist.rendezvous.interface"], ended
