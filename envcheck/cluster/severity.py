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

Keys are exact codes (the emitting modules' named constants, each in the codes table, cluster/finding_codes), or a
prefix ending in `.*` (`xid.*`) for a family of the table; the exact code wins, then the longest prefix.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

from envcheck.burn import corruption, stragglers
from envcheck.checks.cuda import MEMORY_LEAKED
from envcheck.checks.cuda.live_errors import GPU_UNUSABLE
from envcheck.checks.dcgm import HOSTENGINE_HANG
from envcheck.checks.gpu_health.node import FELL_OFF_BUS, GPU_INIT_SLOW, GPU_LOST, NVML_HANG
from envcheck.checks.node import driver_api
from envcheck.checks.node.profile_match import NODE_GPU_COUNT
from envcheck.collectives.sweep import BUSBW_LOW
from envcheck.perf.relative import CODES as RELATIVE_CODES


class Severity(str, enum.Enum):
    """How a node finding drains in `--for health`."""

    HARD = "hard"
    SOFT = "soft"


HARD, SOFT = Severity.HARD, Severity.SOFT

SEVERITY: dict[str, Severity] = {
    # the node lost hardware or its driver is wedged
    GPU_LOST: HARD,  # a GPU on the PCI bus that NVML no longer lists, or fewer GPUs than --expect-gpus
    FELL_OFF_BUS: HARD,
    NVML_HANG: HARD,
    driver_api.INIT_HANG: HARD,
    # a first initialisation over its budget only warns (a cold start); it fails only when it overran in two runs
    # in a row (the checks' own streak, envcheck.probe.node_state), so a failure drains at once
    GPU_INIT_SLOW: HARD,
    driver_api.INIT_SLOW: HARD,
    MEMORY_LEAKED: HARD,  # GPU memory held with no process in the host's view: needs a reset
    NODE_GPU_COUNT: HARD,  # fewer GPUs than --expect-gpus (the node path's count, with the missing addresses)
    driver_api.DRIVER_CRASH: HARD,
    GPU_UNUSABLE: HARD,
    driver_api.COPY_MISMATCH: HARD,  # a copy that came back wrong: the data path is broken
    "cuda.error.*": HARD,
    "xid.*": HARD,  # the Xid catalogue decides which Xids fail (drain) and which only warn
    "dcgm.diag.*": HARD,
    "dcgm.health.*": HARD,  # DCGM's health watch said Failure (its Warning never drains)
    HOSTENGINE_HANG: HARD,
    "profile.*": HARD,  # the node is not the node type it must be (GPU count, model, links, driver)
    "dist.busbw.fail": HARD,  # a #wrong element in the all-reduce sweep: data corruption
    corruption.SDC: HARD,  # the burn: a GPU that computed wrong bits
    corruption.UNRESOLVED: HARD,  # two GPUs that disagree bit for bit, one of them wrong
    stragglers.FLEET_FAR: HARD,  # far below the fleet's baseline: it slows every job it joins
    # performance: slow is not broken until it persists
    **{code: SOFT for code in RELATIVE_CODES},  # perf.matmul_slow, perf.hbm_slow, h2d, d2h, peer
    BUSBW_LOW: SOFT,  # dist.busbw below --min-busbw
    stragglers.STRAGGLER: SOFT,  # the burn: slower than its peers, or under sustained load
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
