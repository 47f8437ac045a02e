"""net.ifname: a socket variable naming an interface that does not exist, read as each library reads it.

Real: the live check and the bundle round trip run on this host's own interfaces (getifaddrs), with the variables
set for real. Staged (only what this host cannot have): the captured dicts of hosts with other interfaces and
InfiniBand HCAs, for the pure verdicts. The matching rules cite NCCL's docs
(https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-socket-ifname) and its source
(src/misc/utils.cc parseStringList/matchIfList, src/os/linux.cc ncclOsFindInterfaces), PyTorch's
torch/csrc/distributed/c10d/init.cpp (GLOO_SOCKET_IFNAME) and gloo's tcp/device.cc lookupAddrForIface.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from envcheck.app.main import main
from envcheck.checks import network
from envcheck.checks.network import verdict
from envcheck.collectives.interface_rules import gloo_pieces, nccl_list, nccl_matches
from envcheck.core.check import Context
from envcheck.core.errors import UsageError
from envcheck.core.result import Status
from envcheck.probe.interfaces import IFF_LOOPBACK
from tests.helpers import HEALTHY_H100, no_gpu_env, run_cli

UP_RUNNING, UP, DOWN, LOOPBACK = 0x1043, 0x1003, 0x82, 0x49
# A staged GPU node: loopback, two NICs, a docker bridge with no containers (up, not running), a down ifb.
HOST: list[dict[str, Any]] = [
    {"name": "lo", "flags": LOOPBACK, "ipv4": ["127.0.0.1"], "ipv6": ["::1"]},
    {"name": "ens1f0", "flags": UP_RUNNING, "ipv4": ["10.0.0.5"], "ipv6": []},
    {"name": "ens1f1", "flags": UP_RUNNING, "ipv4": [], "ipv6": ["fd00::5", "fe80::1"]},
    {"name": "docker0", "flags": UP, "ipv4": ["172.17.0.1"], "ipv6": []},
    {"name": "ifb0", "flags": DOWN, "ipv4": [], "ipv6": []},
]
CTX = Context()


def _judge(
    env: dict[str, str],
    interfaces: list[dict[str, Any]] | None = None,
    infiniband: list[dict[str, Any]] | None = None,
) -> Any:
    data = {"interfaces": HOST if interfaces is None else interfaces, "infiniband": infiniband, "env": env}
    network.validate(data, "network")
    return verdict(data, CTX)


# --- NCCL's reading, case by case from its docs' examples ---------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "name", "expected"),
    [
        ("eth", "eth0", True),
        ("eth", "eth1", True),
        ("eth", "ens1f0", False),  # "eth: use all interfaces starting with eth"
        ("=eth0", "eth0", True),
        ("=eth0", "eth01", False),
        ("=eth0", "eth0.100", False),  # "=eth0: use only eth0"
        ("=eth0,eth1", "eth1", True),
        ("=eth0,eth1", "eth2", False),  # "=eth0,eth1: use only eth0 and eth1"
        ("^docker", "docker0", False),
        ("^docker", "eth0", True),  # "^docker: do not use any starting with docker"
        ("^=docker0", "docker0", False),
        ("^=docker0", "docker1", True),  # "^=docker0: do not use interface docker0"
        ("eth,ib", "ib0", True),
        (",,eth,,", "eth0", True),
        (",,eth,,", "ens1f0", False),  # strtok skips empty entries
        ("=^eth0", "eth0", False),  # '^' only counts first: this is the exact name '^eth0'
    ],
)
def test_nccl_reads_prefixes_exclusions_and_exact_names(value: str, name: str, expected: bool) -> None:
    assert nccl_matches(value, name) is expected


def test_nccl_list_cuts_ports_and_an_empty_list_passes_everything() -> None:
    assert nccl_list("^=mlx5_0:1,mlx5_1,,:2") == (True, True, [("mlx5_0", 1), ("mlx5_1", -1)])
    assert nccl_list("mlx5_0:x") == (False, False, [("mlx5_0", 0)])  # atoi("x") is 0
    assert nccl_matches("mlx5_0:1", "mlx5_0", 1) and not nccl_matches("mlx5_0:1", "mlx5_0", 2)
    assert nccl_matches("", "anything") and not nccl_matches("^", "anything")


def test_gloo_reads_exact_names_split_like_getline() -> None:
    assert gloo_pieces("lo,") == ["lo"] and gloo_pieces("lo,,lo") == ["lo", "", "lo"]
    assert gloo_pieces("eth0,ens1f0") == ["eth0", "ens1f0"] and gloo_pieces(",lo") == ["", "lo"]
    assert (
        gloo_pieces("l") is None and gloo_pieces("") is None
    )  # PyTorch reads it only when longer than 1 char


# --- the verdict from captured dicts ------------------------------------------------------------------------------


def test_nothing_set_passes_and_lists_the_interfaces() -> None:
    result = _judge({})
    assert result.status is Status.PASS and result.fault_class is None
    assert "none of GLOO_SOCKET_IFNAME" in result.summary and "ens1f0 (10.0.0.5)" in result.summary


def test_gloo_naming_a_missing_interface_fails_with_those_that_exist() -> None:
    result = _judge({"GLOO_SOCKET_IFNAME": "eth0"})
    assert result.status is Status.FAIL and result.fault_class == "config"
    assert result.summary.startswith("GLOO_SOCKET_IFNAME=eth0: 'eth0' does not exist")
    for shown in (
        "lo (loopback, 127.0.0.1)",
        "ens1f0 (10.0.0.5)",
        "docker0 (172.17.0.1, not running)",
        "ifb0 (down, no address)",
    ):
        assert shown in result.summary
    assert (
        result.remediation == "export GLOO_SOCKET_IFNAME=ens1f0 (an interface that exists here), or unset "
        "GLOO_SOCKET_IFNAME"
    )


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (
            "ifb0",
            "'ifb0' has no IP address",
        ),  # exists, but gloo needs an address: 'Unable to find address for: ifb0'
        ("lo,,lo", "an empty name between commas"),  # 'interface or hostname can't be empty'
        ("ens", "'ens' does not exist"),  # gloo has no prefixes
    ],
)
def test_gloo_fails_what_gloo_rejects(value: str, problem: str) -> None:
    result = _judge({"GLOO_SOCKET_IFNAME": value})
    assert result.status is Status.FAIL and problem in result.summary


def test_gloo_accepts_exact_names_with_an_address_even_when_not_running() -> None:
    result = _judge({"GLOO_SOCKET_IFNAME": "docker0,lo,"})  # gloo does not check IFF_UP/IFF_RUNNING
    assert (
        result.status is Status.PASS and result.summary == "GLOO_SOCKET_IFNAME=docker0,lo, names docker0, lo"
    )
    assert _judge({"GLOO_SOCKET_IFNAME": "x"}).summary.endswith(
        "is ignored (PyTorch reads it when longer than one character)"
    )


def test_only_loopback_host_says_unset() -> None:
    result = _judge({"GLOO_SOCKET_IFNAME": "eth0"}, interfaces=HOST[:1] + HOST[3:])
    assert result.status is Status.FAIL
    assert result.remediation is not None and result.remediation.startswith("unset GLOO_SOCKET_IFNAME")


def test_nccl_prefix_matching_only_running_addressed_interfaces() -> None:
    assert _judge({"NCCL_SOCKET_IFNAME": "ens"}).summary == "NCCL_SOCKET_IFNAME=ens matches ens1f0, ens1f1"
    assert _judge({"NCCL_SOCKET_IFNAME": "^ens,lo"}).status is Status.FAIL  # docker0 not running, ifb0 down
    result = _judge({"NCCL_SOCKET_IFNAME": "docker"})
    assert result.status is Status.FAIL and result.fault_class == "config"
    assert "docker0 (172.17.0.1, not running): not running with an IP address" in result.summary
    assert result.remediation is not None and result.remediation.startswith(
        "export NCCL_SOCKET_IFNAME=ens1f0"
    )


def test_nccl_socket_family_and_ignored_one_character_values() -> None:
    # NCCL_SOCKET_FAMILY=AF_INET drops ens1f1 (IPv6 only); AF_INET6 drops lo (only ::1, which NCCL skips)
    assert _judge({"NCCL_SOCKET_IFNAME": "ens", "NCCL_SOCKET_FAMILY": "AF_INET"}).summary.endswith(
        "matches ens1f0"
    )
    assert _judge({"NCCL_SOCKET_IFNAME": "=lo", "NCCL_SOCKET_FAMILY": "AF_INET6"}).status is Status.FAIL
    assert _judge({"NCCL_SOCKET_IFNAME": "x"}).status is Status.PASS  # strlen(env) > 1 in ncclFindInterfaces


def test_tensorpipe_takes_one_exact_running_name() -> None:
    result = _judge({"TP_SOCKET_IFNAME": "ens1f0,ens1f1"})  # not a list: that whole string is the name
    assert result.status is Status.FAIL and "listens on 127.0.0.1" in result.summary
    assert (
        _judge({"TP_SOCKET_IFNAME": "docker0"}).status is Status.FAIL
    )  # libuv lists up and running ones only
    assert _judge({"TP_SOCKET_IFNAME": "ens1f1"}).status is Status.PASS


HCAS = [
    {"name": "mlx5_0", "ports": [{"port": 1, "state": "ACTIVE"}]},
    {"name": "mlx5_1", "ports": [{"port": 1, "state": "DOWN"}]},
]


def test_ib_hca_matching_active_ports_and_fallback_warnings() -> None:
    assert _judge({"NCCL_IB_HCA": "=mlx5_0:1"}, infiniband=HCAS).status is Status.PASS
    down = _judge({"NCCL_IB_HCA": "mlx5_1"}, infiniband=HCAS)
    assert down.status is Status.WARN and down.fault_class == "config"
    assert (
        "mlx5_0:1 ACTIVE, mlx5_1:1 DOWN" in down.summary
        and down.remediation == "export NCCL_IB_HCA=mlx5_0, or unset NCCL_IB_HCA"
    )
    none = _judge({"NCCL_IB_HCA": "mlx5_0"})
    assert none.status is Status.WARN and "no /sys/class/infiniband" in none.summary


def test_a_failing_and_a_passing_variable_report_the_failure_only() -> None:
    result = _judge({"GLOO_SOCKET_IFNAME": "lo", "NCCL_SOCKET_IFNAME": "=eth0", "NCCL_IB_HCA": "mlx5_0"})
    assert result.status is Status.FAIL and result.summary.startswith(
        "NCCL_SOCKET_IFNAME==eth0 matches no usable"
    )
    assert "GLOO_SOCKET_IFNAME" not in result.summary and "NCCL_IB_HCA=mlx5_0" in result.summary
    assert result.measured["matches"]["GLOO_SOCKET_IFNAME"] == ["lo"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "network must be an object"),
        ({"interfaces": [{"name": 3}], "env": {}}, "network.interfaces[0].name must be str"),
        ({"interfaces": [{"flags": 1}], "env": {}}, "network.interfaces[0] lacks 'name'"),
        ({"interfaces": [], "env": {"GLOO_SOCKET_IFNAME": 1}}, "network.env.GLOO_SOCKET_IFNAME must be str"),
        ({"env": {}}, "network lacks 'interfaces'"),
    ],
)
def test_malformed_section_is_one_line(data: Any, message: str) -> None:
    with pytest.raises(UsageError, match=message.replace(".", r"\.").replace("[", r"\[")):
        network.validate(data, "network")


# --- live, on this host -------------------------------------------------------------------------------------------


def test_capture_sees_this_hosts_interfaces() -> None:
    captured = network.capture()
    names = {i["name"] for i in captured["interfaces"]}
    lo = next(i for i in captured["interfaces"] if i["name"] == "lo")
    assert "127.0.0.1" in lo["ipv4"] and lo["flags"] & IFF_LOOPBACK
    assert {"lo"} <= names and all(isinstance(i["flags"], int) for i in captured["interfaces"])


def _run(env: dict[str, str]) -> tuple[int, dict[str, Any]]:
    done = run_cli("run", "--only", "net.ifname", "--json", "-", env=env, timeout=60)
    assert "Traceback" not in done.stderr
    return done.returncode, json.loads(done.stdout)["results"][0]


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in no_gpu_env().items() if k not in network.VARIABLES}
    return {**env, **extra}


def test_live_missing_interface_fails_naming_those_that_exist() -> None:
    rc, result = _run(_clean_env(GLOO_SOCKET_IFNAME="nosuch0"))
    assert rc == 1 and result["status"] == "fail" and result["fault_class"] == "config"
    assert result["summary"].startswith("GLOO_SOCKET_IFNAME=nosuch0: 'nosuch0' does not exist")
    assert "lo (loopback, 127.0.0.1)" in result["summary"]
    assert "GLOO_SOCKET_IFNAME" in result["remediation"]


def test_live_lo_and_nothing_set_pass() -> None:
    rc, result = _run(_clean_env(GLOO_SOCKET_IFNAME="lo", NCCL_SOCKET_IFNAME="=lo"))
    assert rc == 0 and result["status"] == "pass"
    assert result["summary"] == "GLOO_SOCKET_IFNAME=lo names lo; NCCL_SOCKET_IFNAME==lo matches lo"
    rc, result = _run(_clean_env())
    assert rc == 0 and result["summary"].startswith("none of GLOO_SOCKET_IFNAME")


def test_bundle_replays_the_verdict_elsewhere(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Capture with the bad variable set; explain (here, without it) gives the verdict `run` gave there."""
    bundle = tmp_path / "bundle.json"
    env = _clean_env(GLOO_SOCKET_IFNAME="nosuch0")
    assert run_cli("facts", "--bundle", str(bundle), env=env, timeout=120).returncode == 0
    section = json.loads(bundle.read_text())["network"]
    assert section["env"] == {"GLOO_SOCKET_IFNAME": "nosuch0"} and section["interfaces"]
    rc, report = (
        main(["explain", str(bundle), "--json", "-", "--allow-cpu"]),
        json.loads(capsys.readouterr().out),
    )
    replayed = {r["name"]: r for r in report["results"]}["net.ifname"]
    _, ran = _run(env)
    assert rc == 1 and (replayed["status"], replayed["fault_class"]) == ("fail", "config")
    assert replayed["summary"] == ran["summary"] and replayed["remediation"] == ran["remediation"]


def test_malformed_network_section_in_a_bundle_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fixture = HEALTHY_H100
    bundle = json.loads(fixture.read_text())
    bundle["network"] = {"interfaces": "eth0", "env": {}}
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bundle))
    assert main(["explain", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "bundle's network.interfaces must be list" in err and len(err.splitlines()) == 1
