"""Reaching the store and probing the transport with real sockets on loopback addresses (127.0.0.x are all this
host's), and the look Slurm runs on a node, over a real process carrying a task's Slurm variables. The cross-node
cases (a firewall, a node without carrier, a task that never started) run for real in tests/cluster."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from envcheck.collectives import absent, remote_look, rendezvous
from envcheck.collectives.transport_probe import PROBE_BYTES, Listener, exchange
from tests.helpers.ports import free_port


@contextmanager
def listening(address: str) -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind((address, 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def test_the_store_is_reached_at_the_names_address() -> None:
    with listening("127.0.0.1") as port:
        reach = rendezvous.reach_store("localhost", port, 5.0)
    assert reach.address in ("127.0.0.1", "::1") and not reach.via_fallback and reach.problem is None, reach


def test_rank_0s_node_answers_when_the_names_address_does_not() -> None:
    with listening("127.0.0.3") as port:  # "rank 0's node" per Slurm; the name points at 127.0.0.2
        reach = rendezvous.reach_store("127.0.0.2", port, 5.0, (["127.0.0.2"], None), fallback="127.0.0.3")
    assert reach.address == "127.0.0.3" and reach.via_fallback, reach
    assert reach.tried == {
        "127.0.0.2": "connection refused (nothing listens there, or a firewall rejects it)"
    }


def test_refusals_until_the_budget_ends_are_the_problem() -> None:
    reach = rendezvous.reach_store("127.0.0.1", free_port(), 1.0, (["127.0.0.1"], None), fallback="127.0.0.1")
    assert reach.address is None and not reach.via_fallback
    assert reach.problem is not None and reach.problem.startswith("127.0.0.1:") and "refused" in reach.problem


def test_the_probe_moves_its_bytes_both_ways_and_names_a_refusal() -> None:
    listener = Listener("127.0.0.1")
    try:
        outcome = exchange("127.0.0.1", listener.port)
    finally:
        listener.close()
    assert outcome["ok"] and outcome["bytes"] == PROBE_BYTES and outcome["up_s"] > 0 and outcome["down_s"] > 0
    refused = exchange("127.0.0.1", free_port())  # tried three times, as gloo's ConnectOperation does
    assert refused == {"ok": False, "error": "connection refused", "connect_s": refused["connect_s"]}
    assert refused["connect_s"] >= 0.4


def test_slurms_look_finds_a_tasks_process_and_what_it_runs() -> None:
    env = {
        **os.environ,
        "SLURM_JOB_ID": "777",
        "SLURM_STEP_ID": "3",
        "SLURM_PROCID": "1",
        "SLURMD_NODENAME": "nX",
    }
    proc = subprocess.Popen(["sleep", "30"], env=env)
    try:
        deadline = 50
        found: list[dict[str, object]] = []
        while not found and deadline:
            found = remote_look.tasks("777", "3", "nX", {1})
            deadline -= 1
        assert [(t["rank"], t["pid"], t["command"], t["leaf"], t["envcheck"]) for t in found] == [
            (1, proc.pid, "sleep 30", True, False)
        ], found
        assert (
            remote_look.tasks("777", "3", "nX", {2}) == [] and remote_look.tasks("777", "4", "nX", {1}) == []
        )
        view = {
            "node": "nX",
            "view": {"tasks": found, "connect": {"10.0.0.1": None}},
            "error": None,
            "state": None,
        }
        assert not absent.gone(view, 1) and absent.gone(view, 2) and not absent.cut_off(view)
        cut = {**view, "view": {"tasks": found, "connect": {"10.0.0.1": "no answer within 2s"}}}
        assert absent.cut_off(cut) and absent.conclusive({"nX": cut}, [1], ["n0", "nX"])
        assert not absent.conclusive({"nX": view}, [1], ["n0", "nX"])  # running something else: wait
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_the_look_runs_as_a_module_and_prints_one_json_line() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "envcheck.collectives.remote_look",
            "--job",
            "1",
            "--step",
            "0",
            "--ranks",
            "1",
            "--name",
            "localhost",
            "--port",
            str(free_port()),
            "--to",
            "127.0.0.1",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    (line,) = done.stdout.splitlines()
    answer = json.loads(line)
    assert answer["tasks"] == [] and answer["resolve"]["addresses"], answer
    assert answer["connect"]["127.0.0.1"].startswith("connection refused"), answer
