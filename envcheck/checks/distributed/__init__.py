"""Distributed checks: exact, hang-proof collectives across GPUs (NCCL) or CPU ranks (gloo), and busbw.

Check code lives here; `python -m envcheck.distributed` is the thin torchrun entry for many nodes.
"""

from __future__ import annotations

from envcheck.checks.distributed.checks import (
    ALL_REDUCE_TIMEOUT_S,
    BUSBW_TIMEOUT_S,
    all_gather_broadcast,
    all_reduce_busbw,
    nccl_all_reduce,
)
from envcheck.checks.distributed.facts import distributed_facts
from envcheck.checks.distributed.sweep import busbw
from envcheck.checks.distributed.sweep_api import all_reduce_sweep
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
)

__all__ = ["CHECKS", "all_reduce_sweep", "busbw", "distributed_facts"]
