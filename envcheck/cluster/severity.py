"""Which node findings drain at once and which only once they repeat, by finding code: data beside the exit policy
(policy.py), read by the health check's streaks (streaks.py).

- HARD: the node cannot run a job correctly now (a lost GPU, an uncorrectable ECC error, a wedged driver): a node
  FAIL drains on the first run, as it always did.
- SOFT: performance and other findings that come and go (a throttled GPU, a slow link): they drain only after they
  repeat in N consecutive health runs (`--drain-after`), as Penguin's health checks count a `fail_streak` ("the
  number of consecutive failures allowed before the failure is reported") and Kubernetes probes a
  `failureThreshold` (default 3). A soft finding counts as a warning or as a failure (`--strict-perf`) alike.
- A code not listed: a node FAIL is hard (today's behaviour: nothing that drained before now waits), a WARN never
  drains.

Keys are exact codes, or a prefix ending in `.*` (`xid.*`); the exact code wins, then the longest prefix.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable


class Severity(str, enum.Enum):
    """How a node finding drains in `--for health`."""

    HARD = "hard"
    SOFT = "soft"


HARD, SOFT = Severity.HARD, Severity.SOFT

SEVERITY: dict[str, Severity] = {
    # the node lost hardware or its driver is wedged
    "gpu.lost": HARD,  # a GPU on the PCI bus that NVML no longer lists, or fewer GPUs than --expect-gpus
    "gpu.fell_off_bus": HARD,
    "gpu.health": HARD,  # gpu.health's failures: uncorrectable ECC, pending retirement or remap, remap failure
    "nvml.hang": HARD,
    "cuda.init_hang": HARD,
    # a first initialisation over its budget only warns (a cold start); it fails only when it overran in two runs
    # in a row (the checks' own streak, envcheck.probe.node_state), so a failure drains at once
    "gpu.init_slow": HARD,
    "cuda.init_slow": HARD,
    "cuda.memory_leaked": HARD,  # GPU memory held with no process in the host's view: needs a reset
    "node.gpu_count": HARD,  # fewer GPUs than --expect-gpus (the node path's count, with the missing addresses)
    "cuda.driver_crash": HARD,
    "cuda.gpu_unusable": HARD,
    "cuda.copy_mismatch": HARD,  # a copy that came back wrong: the data path is broken
    "cuda.error.*": HARD,
    "xid.*": HARD,  # the Xid catalogue decides which Xids fail (drain) and which only warn
    "dcgm.diag.*": HARD,
    "dcgm.hostengine_hang": HARD,
    "profile.*": HARD,  # the node is not the node type it must be (GPU count, model, links, driver)
    "dist.busbw.fail": HARD,  # a #wrong element in the all-reduce sweep: data corruption
    # performance: slow is not broken until it persists
    "perf.matmul_slow": SOFT,
    "perf.hbm_slow": SOFT,
    "perf.h2d_slow": SOFT,
    "perf.d2h_slow": SOFT,
    "perf.peer_slow": SOFT,
    "perf.busbw_low": SOFT,  # dist.busbw below --min-busbw
}


def severity(code: str | None) -> Severity | None:
    """The listed severity of `code` (exact, else the longest matching `prefix.*`), or None when not listed."""
    if not code:
        return None
    if code in SEVERITY:
        return SEVERITY[code]
    prefixes = [k[:-1] for k in SEVERITY if k.endswith(".*") and code.startswith(k[:-1])]
    return SEVERITY[max(prefixes, key=len) + "*"] if prefixes else None


def all_soft(codes: Iterable[str | None]) -> bool:
    """True when every code given is listed SOFT (a result whose findings are all soft)."""
    listed = [severity(c) for c in codes if c]
    return bool(listed) and all(s is SOFT for s in listed)
