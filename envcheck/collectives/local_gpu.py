"""Which GPU a rank of the multi-node entry takes (NCCL needs one per process), from LOCAL_RANK, the GPUs this
process can see and how many ranks share its node (torchrun's variables, or Slurm's task layout under srun); and
why a rank has none."""

from __future__ import annotations

from collections.abc import Mapping

from envcheck.probe.slurm_layout import rank_nodes


def local_device(local_rank: int, visible: int, local_world: int | None = None) -> int | None:
    """The CUDA device index this rank takes, from what this process can see; None when it has none.

    - LOCAL_RANK, when it is below the visible count (torchrun: every process sees all the node's GPUs);
    - 0, when exactly one GPU is visible: `srun --gpus-per-task=1` (which implies `--gpu-bind=per_task:1`),
      `--gpu-bind=single:1`/`map_gpu`, or a container given one GPU: each task sees its own GPU as device 0, so
      `cuda:LOCAL_RANK` fails on every rank above 0 ("CUDA error: invalid device ordinal", ACEsuit/mace#435);
    - LOCAL_RANK modulo the visible count, when fewer GPUs are visible than ranks run on this node
      (`--gpus-per-task=2`: each task sees its own two), the ordinal Slurm sites document
      (mila-iqia/mila-docs#245: `rank % device_count()`; DeepSpeed#3165 for the same case).
    """
    if visible <= 0:
        return None
    if local_rank < visible:
        return local_rank
    if visible == 1:
        return 0
    if local_world is not None and visible < local_world:
        return local_rank % visible
    return None


def local_world_size(env: Mapping[str, str], rank: int) -> int | None:
    """How many ranks run on this node: torchrun's LOCAL_WORLD_SIZE, else from Slurm's task layout, else None."""
    text = env.get("LOCAL_WORLD_SIZE", "")
    if text.isdigit():
        return int(text)
    nodes = rank_nodes(env)
    if nodes is None or not 0 <= rank < len(nodes):
        return None
    return nodes.count(nodes[rank])


def local_rank_problem(
    local_rank: int, visible: int, cuda_visible_devices: str | None, local_world: int | None = None
) -> str | None:
    """Why LOCAL_RANK cannot have a GPU of its own (NCCL needs one per process), or None when it can."""
    if local_device(local_rank, visible, local_world) is not None:
        return None
    shown = "unset" if cuda_visible_devices is None else repr(cuda_visible_devices)
    return (
        f"LOCAL_RANK {local_rank} has no GPU: only {visible} GPU(s) visible to this process "
        f"(CUDA_VISIBLE_DEVICES={shown}); start torchrun with --nproc-per-node {max(visible, 1)} or fewer "
        f"(one process per visible GPU), or make more GPUs visible"
    )
