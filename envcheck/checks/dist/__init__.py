"""Distributed checks: exact, hang-proof collectives across GPUs (NCCL) or CPU ranks (gloo), and busbw.

Shaped like nccl-tests: the specs here, the check bodies beside them (`launches`), and in envcheck/collectives one
module per collective (`all_reduce`, `all_gather`, `broadcast`, `sweep` for the busbw sweep, `ddp`, ...) over one
shared launcher (`launch`), verifier (`pattern`, `verdicts`) and timing module (`timing`). Adding a collective = its
module, its line in the collectives registry, and a check body here with its line in CHECKS.
`python -m envcheck.distributed` is the thin torchrun entry for many nodes.
"""

from __future__ import annotations

from envcheck.checks.dist.launches import (DDP_TIMEOUT_S, all_gather_broadcast, all_reduce_busbw, ddp_differential,
                                           nccl_all_reduce)
from envcheck.collectives.common import ALL_REDUCE_TIMEOUT_S
from envcheck.probe.topology import distributed_facts
from envcheck.collectives.sweep import BUSBW_TIMEOUT_S, busbw
from envcheck.collectives.bench_sweep import all_reduce_sweep
from envcheck.core.check import CheckSpec, Level, Needs

CHECKS: tuple[CheckSpec, ...] = (
    CheckSpec("dist.all_reduce", nccl_all_reduce,
              "all-reduce is exact on every element (float32, bf16 and fp16 #wrong 0), "
              "one NCCL rank per GPU or gloo ranks on CPU",
              level=Level.QUICK, needs=Needs(torch=True), timeout_s=ALL_REDUCE_TIMEOUT_S),
    CheckSpec("dist.collectives", all_gather_broadcast,
              "all_gather and broadcast reproduce every element exactly",
              level=Level.QUICK, needs=Needs(torch=True), timeout_s=ALL_REDUCE_TIMEOUT_S),
    CheckSpec("dist.busbw", all_reduce_busbw,
              "all-reduce algbw/busbw over a message-size sweep (nccl-tests convention), vs --min-busbw",
              level=Level.FULL, needs=Needs(torch=True), timeout_s=BUSBW_TIMEOUT_S),
    CheckSpec("ddp.differential", ddp_differential,
              "a DistributedDataParallel step equals one process on the concatenated batch across bucket size, "
              "gradient_as_bucket_view, static_graph, find_unused_parameters, no_sync and comm hooks; SyncBatchNorm "
              "on GPUs", level=Level.FULL, needs=Needs(torch=True), timeout_s=DDP_TIMEOUT_S),
)

__all__ = ["CHECKS", "all_reduce_sweep", "busbw", "distributed_facts"]
