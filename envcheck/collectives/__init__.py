"""The distributed machinery, shaped like nccl-tests: shared rank machinery, thin collectives, the multi-node entry.

- Rank machinery: the launcher (`launch`, `forked`, `rank`, `workdirs`), what a rank is given and runs
  (`rank_context`, `rank_plan`, `rank_hook`), the shared verifier and timing (`pattern`, `verdicts`, `timing`,
  `failures`), the single-node launch machinery the checks share (`common`, `bench_sweep`, `shm`).
- Thin collectives, each only its rank side and its verdict, reached through the typed registry (`registry`):
  `all_reduce`, `all_gather`, `broadcast`, `sweep`, `pairs` (with `pair_verdict`, `tournament`), `ddp`,
  `sync_batchnorm`.
- The multi-node entry (`python -m envcheck.distributed`): `torchrun` with its side channel and heartbeat watch
  (`rank_watch`), the roll call before it (`rollcall`, `rendezvous`, `gate`, `crossnode`) and the interface rules
  (`interface_rules`).

The dist.* check specs, and the check bodies that launch a thin collective, are in envcheck/checks/dist.
"""
