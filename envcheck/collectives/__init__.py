"""The distributed machinery, shaped like nccl-tests: shared rank machinery, thin collectives, the multi-node entry.

- Rank machinery: the launcher (`launch`, `forked`, `rank`, `workdirs`), what a rank is given and runs
  (`rank_context`, `rank_plan`, `rank_hook`), the shared verifier and timing (`pattern`, `verdicts`, `timing`,
  `failures`), the single-node launch machinery the checks share (`common`, `bench_sweep`, `shm`).
- Thin collectives, each only its rank side and its verdict, reached through the typed registry (`registry`):
  `all_reduce`, `all_gather`, `broadcast`, `sweep`, `pairs` (with `pair_verdict`, `tournament`), `ddp`,
  `sync_batchnorm`.
- The multi-node entry (`python -m envcheck.distributed`): `torchrun` with its side channel and heartbeat watch
  (`rank_watch`), and the gate before it (`gate`): each rank's look before the store (`look`), the roll call
  (`rollcall`, `rendezvous`), Slurm's view of ranks that never arrived (`absent`, `remote_look`), their verdicts
  (`crossnode`, `crossnode_reach`, `crossnode_env`, codes in `crossnode_codes`), the probe of the backend's own
  connections between nodes (`transport`, `transport_probe`, `transport_verdict`) and the interface rules
  (`interface_rules`).

The dist.* check specs, and the check bodies that launch a thin collective, are in envcheck/checks/dist.
"""
