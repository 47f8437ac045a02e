"""dist.* name a socket variable that selects no interface as the cause of a failed rank init.

Real: the gloo ranks run for real with GLOO_SOCKET_IFNAME naming a missing interface and fail with gloo's own
error. Staged (NCCL cannot run here, no GPU): NCCL launch outcomes whose rank error is the real text from public
reports, and the interfaces of the hosts those reports came from.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from envcheck.collectives import common as checks
from envcheck.collectives.interface_rules import VARIABLES
from envcheck.collectives.launch import LaunchOutcome, LaunchPlan, RankOutcome
from envcheck.collectives.verdicts import interface_cause
from envcheck.core.result import Status
from tests.helpers import no_gpu_env, processes_with_marker, run_cli

# NCCL 2.14 through PyTorch, as reported in https://github.com/EasonXiao-888/MambaTree/issues/14 (the same
# `Bootstrap : no socket interface found` with NCCL_SOCKET_IFNAME=eth0 set: https://github.com/pytorch/pytorch/issues/29482)
NCCL_214 = (
    "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1201, internal error, "
    "NCCL version 2.14.3\nncclInternalError: Internal check failed.\nLast error:\n"
    "Bootstrap : no socket interface found"
)
NCCL_WARN = "gpu617:22841:22841 [0] bootstrap.cc:37 NCCL WARN Bootstrap : no socket interface found"
# NCCL 2.27.7 with NCCL_SOCKET_IFNAME=eth2 naming a missing interface: https://github.com/NVIDIA/nccl/issues/1837
NCCL_227 = (
    "ncclInternalError: Internal check failed.\nLast error:\n"
    "ncclSocketInit: connecting to address  with family 59936 is neither AF_INET(2) nor AF_INET6(10)"
)
# The staged GPU node: its NIC is ens1f0, not eth0.
HOST: list[dict[str, Any]] = [
    {"name": "lo", "flags": 0x49, "ipv4": ["127.0.0.1"], "ipv6": ["::1"]},
    {"name": "ens1f0", "flags": 0x1043, "ipv4": ["10.0.0.5"], "ipv6": []},
]


@pytest.mark.parametrize("text", [NCCL_214, NCCL_WARN, NCCL_227])
def test_nccl_no_interface_error_is_blamed_on_the_variable(text: str) -> None:
    cause = interface_cause(text, {"NCCL_SOCKET_IFNAME": "eth0"}, HOST)
    assert cause is not None
    summary, fix = cause
    assert summary.startswith("NCCL_SOCKET_IFNAME=eth0 matches no usable interface")
    assert "ens1f0 (10.0.0.5)" in summary and "lo (loopback, 127.0.0.1)" in summary
    assert fix.startswith("export NCCL_SOCKET_IFNAME=ens1f0")


def test_no_cause_when_the_variable_is_fine_unset_or_the_error_is_another() -> None:
    assert (
        interface_cause(NCCL_214, {"NCCL_SOCKET_IFNAME": "ens"}, HOST) is None
    )  # it matches ens1f0: not this
    assert interface_cause(NCCL_214, {}, HOST) is None
    assert (
        interface_cause(
            "NCCL WARN Call to connect failed : Connection refused", {"NCCL_SOCKET_IFNAME": "eth0"}, HOST
        )
        is None
    )


def test_nccl_launch_failure_names_the_cause(monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole verdict path of a failed launch: the staged NCCL ranks raised the 2.14 error in init."""
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "eth0")
    monkeypatch.setattr(checks, "interfaces", lambda: HOST)
    ranks = [
        RankOutcome(
            r,
            1,
            False,
            [("started", 1.0), ("store", 1.1), ("init", 1.2)],
            {"rank": r, "error": NCCL_214.splitlines()[0], "traceback": NCCL_214},
            NCCL_WARN,
        )
        for r in range(2)
    ]
    result = checks.launch_failure(
        LaunchOutcome(LaunchPlan("nccl", 2, ("correctness",), 18.0), ranks, 1.3, False), []
    )
    assert result.status is Status.FAIL and result.fault_class == "config"
    assert result.summary.startswith(
        "nccl ranks failed to initialise: NCCL_SOCKET_IFNAME=eth0 matches no usable"
    )
    assert (result.remediation or "").startswith("export NCCL_SOCKET_IFNAME=ens1f0")
    assert "Bootstrap : no socket interface found" in result.details


@pytest.mark.parametrize(
    ("value", "gloo_says", "cause"),
    [
        (
            "nosuch0",
            "Unable to find address for: nosuch0",
            "GLOO_SOCKET_IFNAME=nosuch0: 'nosuch0' does not exist",
        ),
        (
            "lo,,lo",
            "interface or hostname can't be empty",
            "GLOO_SOCKET_IFNAME=lo,,lo: an empty name between commas",
        ),
    ],
)
def test_real_gloo_ranks_name_the_missing_interface(
    tmp_path: Path, value: str, gloo_says: str, cause: str
) -> None:
    marker = f"envcheck-net-test-{uuid.uuid4().hex}"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = (
        tmp_path / f"envcheck-dist-{dead.pid}-old"
    )  # a dead launch's leftover: the launcher sweeps its TMPDIR
    stale.mkdir()
    env = {k: v for k, v in no_gpu_env().items() if k not in VARIABLES}
    env.update(GLOO_SOCKET_IFNAME=value, TMPDIR=str(tmp_path), ENVCHECK_TEST_MARKER=marker)
    done = run_cli("run", "--only", "dist.all_reduce", "--allow-cpu", "--json", "-", env=env, timeout=120)
    result = json.loads(done.stdout)["results"][0]
    assert done.returncode == 1 and result["status"] == "fail" and result["fault_class"] == "config"
    assert result["summary"].startswith(f"gloo ranks failed to initialise: {cause}")
    assert "lo (loopback, 127.0.0.1)" in result["summary"]
    assert result["remediation"].endswith("or unset GLOO_SOCKET_IFNAME")
    assert gloo_says in result["details"], "the rank logs keep gloo's own error"
    assert processes_with_marker(marker) == [], "a rank survived the check"
    assert not stale.exists(), "the launch did not work in this TMPDIR, so the next line would prove nothing"
    assert list(tmp_path.glob("envcheck-dist-*")) == [], "a launch work directory was left behind"


def test_a_missing_interface_is_not_retried_with_transports_disabled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Simulated NCCL launcher (no GPU here): its ranks raise the 2.14 'no socket interface found' error. No
    P2P/SHM retry can fix a variable naming a missing interface, so the launch is not repeated."""
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "eth0")
    monkeypatch.delenv("ENVCHECK_TEST_FAULT", raising=False)
    monkeypatch.setattr(checks, "interfaces", lambda: HOST)
    plans: list[LaunchPlan] = []

    def launcher(plan: LaunchPlan) -> LaunchOutcome:
        plans.append(plan)
        ranks = [
            RankOutcome(
                r,
                1,
                False,
                [("started", 1.0), ("store", 1.1), ("init", 1.2)],
                {"rank": r, "error": NCCL_214.splitlines()[0], "traceback": NCCL_214},
                NCCL_WARN,
            )
            for r in range(2)
        ]
        return LaunchOutcome(plan, ranks, 1.3, False)

    outcome, fixed_by, notes = checks.launch_with_bisection(
        LaunchPlan("nccl", 2, ("correctness",), 18.0), 60.0, launcher
    )
    assert not outcome.ok and fixed_by is None and notes == []
    assert len(plans) == 1
