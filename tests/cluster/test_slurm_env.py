"""Slurm's task variables as torchrun's, and hostlist expansion (with and without scontrol)."""

from __future__ import annotations

from pathlib import Path

import pytest

from envcheck.probe import slurm_env as slurm
from envcheck.probe.slurm_env import expand_nodelist, first_node, torchrun_env
from tests.helpers.slurm import Cluster


@pytest.mark.parametrize(
    ("text", "hosts"),
    [
        ("node07", ["node07"]),
        ("node[01-04,07]", ["node01", "node02", "node03", "node04", "node07"]),
        ("a1,b[2-3]", ["a1", "b2", "b3"]),
        ("gpu[8-10]", ["gpu8", "gpu9", "gpu10"]),
        ("rack[1-2]-n[01-02]", ["rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"]),
        ("x[001-002],y", ["x001", "x002", "y"]),
    ],
)
def test_expand_nodelist(text: str, hosts: list[str]) -> None:
    assert expand_nodelist(text) == hosts


@pytest.mark.slurm
@pytest.mark.parametrize("text", ["node[01-04,07]", "a1,b[2-3]", "rack[1-2]-n[01-02]", "gpu[8-10]"])
def test_our_parser_agrees_with_scontrol(slurm_cluster: Cluster, text: str) -> None:
    out = slurm_cluster.run("scontrol", "show", "hostnames", text)
    assert out.returncode == 0, out.stderr
    assert expand_nodelist(text) == out.stdout.split()


@pytest.mark.slurm
def test_first_node_asks_scontrol(slurm_cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_CONF", slurm_cluster.env["SLURM_CONF"])
    monkeypatch.setattr(
        slurm, "expand_nodelist", lambda text: pytest.fail("scontrol answers: no need to parse")
    )
    assert first_node("node[03-04]") == "node03"


def test_first_node_parses_when_scontrol_cannot_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "slurm.conf").write_text("ClusterName=x\n")  # no SlurmctldHost: scontrol exits 1
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "slurm.conf"))
    assert first_node("node[03-04]") == "node03"


def test_malformed_nodelist_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="not N or N-M"):
        expand_nodelist("node[a-b]")


SLURM = {
    "SLURM_PROCID": "9",
    "SLURM_NTASKS": "16",
    "SLURM_LOCALID": "1",
    "SLURM_JOB_NODELIST": "node[03-04]",
    "SLURM_JOB_ID": "1234",
    "SLURM_STEP_ID": "2",
}


def test_torchrun_env_from_slurm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slurm.shutil, "which", lambda name: None)  # our parser, not scontrol
    env = torchrun_env(SLURM)
    assert env == {
        "RANK": "9",
        "WORLD_SIZE": "16",
        "LOCAL_RANK": "1",
        "MASTER_ADDR": "node03",
        "MASTER_PORT": str(20000 + (1234 * 16 + 2) % 20000),
    }


def test_torchrun_or_explicit_master_wins() -> None:
    assert torchrun_env({**SLURM, "RANK": "0"}) == {}
    env = torchrun_env({**SLURM, "MASTER_ADDR": "head", "MASTER_PORT": "29400"})
    assert "MASTER_ADDR" not in env and "MASTER_PORT" not in env
    assert torchrun_env({k: v for k, v in SLURM.items() if k != "SLURM_LOCALID"}) == {}
