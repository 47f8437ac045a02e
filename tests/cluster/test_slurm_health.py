"""`envcheck run --for health` as Slurm's HealthCheckProgram, against the real one-node Slurm (tests/helpers/slurm.py):
it drains with envcheck's reason, resumes only its own drains once the named check passes again, and never touches
a node an admin drained. slurmd's 60 s kill is honoured by the mode's own budget.

The program is started by the test as slurmd would start it (root, on the node, SLURMD_NODENAME set by the script
in docs/cluster.md); the drain and resume go through the real slurmctld and are read back with sinfo.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from envcheck.app.cluster_mode import HEALTH_CHECKS_S, Mode
from tests.cluster.test_slurm import health_check
from tests.helpers import request_of
from tests.helpers.slurm import Cluster

FAULT = ("--expect-gpus", "1", "--only", "cuda.available")  # no GPU here: a node that must have one lost it
PASS = (
    "--allow-cpu",
    "--only",
    "cuda.available",
)  # the same check, judged without that demand: it passes (warn)


@pytest.mark.slurm
@pytest.mark.slow
def test_an_envcheck_drain_is_resumed_when_its_check_passes_again(cluster: Cluster, tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    drained = health_check(cluster, *FAULT, state=state)
    assert drained.returncode == 1, drained.stderr
    assert cluster.state() in ("drained", "drain")
    assert cluster.reason().startswith(
        "envcheck: [node] cuda.available: CUDA is not available: no /dev/nvidia*"
    )
    other = health_check(
        cluster, "--allow-cpu", "--only", "container.shm", state=state
    )  # not the named check
    assert "stays drained: cuda.available did not pass in this run" in other.stderr
    assert cluster.state() in ("drained", "drain")
    resumed = health_check(cluster, *PASS, state=state)
    assert resumed.returncode == 0, resumed.stderr
    assert f"envcheck: node {cluster.node} resumed: cuda.available passes again" in resumed.stderr
    cluster.wait_state("idle", timeout=10)
    assert cluster.reason() == ""


@pytest.mark.slurm
@pytest.mark.slow
def test_a_node_an_admin_drained_is_never_touched(cluster: Cluster, tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    admin = cluster.run("scontrol", "update", f"NodeName={cluster.node}", "State=DRAIN", "Reason=bios update")
    assert admin.returncode == 0, admin.stderr
    for args in (FAULT, PASS):  # neither a fault nor a pass changes an admin's drain
        done = health_check(cluster, *args, state=state)
        assert f"node {cluster.node} is drained by someone else (bios update): left as it is" in done.stderr
        assert cluster.state() in ("drained", "drain")
        assert cluster.reason() == "bios update"


@pytest.mark.parametrize("given, expected", [(None, HEALTH_CHECKS_S), (300.0, HEALTH_CHECKS_S), (20.0, 20.0)])
def test_the_health_check_budget_fits_slurmds_60_seconds(
    given: float | None, expected: float, capsys: pytest.CaptureFixture[str]
) -> None:
    mode = Mode.of(request_of("run", "--for", "health", *(["--timeout", f"{given:g}"] if given else [])))
    assert mode.timeout == expected and HEALTH_CHECKS_S + 2 * 5 + 10 <= 60  # checks + 2 Slurm calls + start
    assert ("capped to 40 s: slurmd kills a HealthCheckProgram after 60 s" in capsys.readouterr().err) == (
        given == 300
    )
