"""Which node each rank of an srun step runs on (envcheck.probe.slurm_layout), from Slurm's own variables."""

from __future__ import annotations

import pytest

from envcheck.probe.slurm_layout import rank_nodes, tasks_per_node


def test_tasks_per_node_expands_slurms_compressed_counts() -> None:
    assert tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    with pytest.raises(ValueError, match="is not N or N"):
        tasks_per_node("2(3)")


def test_block_and_cyclic_layouts() -> None:
    env = {"SLURM_STEP_NODELIST": "n[1-3]", "SLURM_STEP_TASKS_PER_NODE": "2(x3)"}
    assert rank_nodes(env) == ["n1", "n1", "n2", "n2", "n3", "n3"]
    assert rank_nodes({**env, "SLURM_DISTRIBUTION": "cyclic"}) == ["n1", "n2", "n3", "n1", "n2", "n3"]


def test_unknown_layouts_name_no_node() -> None:
    assert rank_nodes({}) is None
    assert (
        rank_nodes({"SLURM_STEP_NODELIST": "n[1-2]", "SLURM_STEP_TASKS_PER_NODE": "2"}) is None
    )  # counts != nodes
    assert (
        rank_nodes(
            {"SLURM_STEP_NODELIST": "n1", "SLURM_STEP_TASKS_PER_NODE": "2", "SLURM_DISTRIBUTION": "arbitrary"}
        )
        is None
    )
