"""`dist.pairs`: all-reduce busbw between every pair of nodes, every pair of a round at once.

The rank side. Ranks learn each other's node (hostname, as the roll call names nodes), order the nodes by their
first rank and walk the round-robin tournament (envcheck.collectives.tournament): n−1 rounds for n even, n for
n odd. In a round every rank creates the round's pair groups (all ranks of both nodes; every rank calls
`new_group` for every group, in the same order, as torch requires), times an all-reduce in its own pair's group
with the shared timing (max over the pair's ranks), verifies one exact all-reduce (the shared pattern), and
waits at a barrier of all ranks, so rounds never overlap. The pair's first rank returns the row; the verdict
is envcheck.collectives.pair_verdict.
"""

from __future__ import annotations

import socket
from functools import partial
from typing import Any

from envcheck.collectives.pair_verdict import judge
from envcheck.collectives.pattern import count_wrong_exact, fill_exact
from envcheck.collectives.rank_context import RankContext
from envcheck.collectives.timing import MIB, algbw, busbw, slowest_rank, time_op
from envcheck.collectives.tournament import rounds

__all__ = ["judge", "run"]

CPU_PAIR_BYTES = 2 * MIB
GPU_PAIR_BYTES = 256 * MIB
PAIR_BUDGET_S = 0.3  # the timed iterations of one pair aim at this long
MAX_ITERS = 20


def nodes_and_ranks() -> list[tuple[str, list[int]]]:
    """(node, its ranks) for every node of the job, ordered by the node's first rank (collective)."""
    import torch.distributed as dist

    names: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(names, socket.gethostname())
    nodes: dict[str, list[int]] = {}
    for rank, name in enumerate(names):
        nodes.setdefault(str(name), []).append(rank)
    return list(nodes.items())


def measure(group: Any, nbytes: int, device: Any) -> dict[str, Any]:
    """Time and verify a float32 all-reduce of `nbytes` in `group` (its ranks only): this rank's view of it."""
    import torch
    import torch.distributed as dist

    on_gpu = device.type == "cuda"
    size, me = dist.get_world_size(group), dist.get_rank(group)
    buf = torch.zeros(nbytes // 4, device=device, dtype=torch.float32)
    op = partial(dist.all_reduce, buf, group=group)
    once = slowest_rank(time_op(op, 1, 1, on_gpu, group), device, group)  # warm-up, then one timed call
    iters = max(
        1, min(MAX_ITERS, int(PAIR_BUDGET_S / once) if once > 0 else MAX_ITERS)
    )  # agreed: from the max
    seconds = slowest_rank(time_op(op, 0, iters, on_gpu, group), device, group)
    fill_exact(buf, me)
    dist.all_reduce(buf, group=group)
    wrong = torch.tensor([count_wrong_exact(buf, size)], device=device, dtype=torch.int64)
    dist.all_reduce(wrong, group=group)
    del buf
    return {
        "bytes": nbytes,
        "iters": iters,
        "time_us": round(seconds * 1e6, 2),
        "algbw_gbps": round(algbw(nbytes, seconds), 6),
        "busbw_gbps": round(busbw(algbw(nbytes, seconds), size), 6),
        "wrong": int(wrong.item()),
    }


def run(rc: RankContext) -> dict[str, Any]:
    """Every pair of nodes in tournament rounds; returns the node list and the rows this rank measured first."""
    import torch.distributed as dist

    nodes = nodes_and_ranks()
    schedule = rounds(len(nodes))
    nbytes = rc.sizes[-1] if rc.sizes else GPU_PAIR_BYTES if rc.device.type == "cuda" else CPU_PAIR_BYTES
    rows = []
    for index, pairs in enumerate(schedule, 1):
        rc.progress(f"pairs.round{index}")
        mine = None
        for a, b in pairs:  # every rank creates every group of the round, in the same order
            ranks = sorted(nodes[a][1] + nodes[b][1])
            group = dist.new_group(ranks)
            if rc.rank in ranks:
                mine = (a, b, ranks, group)
        if mine is not None:
            a, b, ranks, group = mine
            row = measure(group, nbytes, rc.device)
            if rc.rank == ranks[0]:
                rows.append({"round": index, "nodes": [nodes[a][0], nodes[b][0]], "ranks": ranks, **row})
        dist.barrier()  # the round ends for every rank before the next one starts
        if mine is not None:
            dist.destroy_process_group(mine[3])
    return {"nodes": [name for name, _ in nodes], "rounds": len(schedule), "rows": rows}
