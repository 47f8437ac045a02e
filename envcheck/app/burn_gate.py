"""What `envcheck burn` decides around the burn: the fleet's baseline for this node's group, and the exit code (a plain burn, or `--for preflight`, a Kubernetes Job's gate, by the cluster policy's fault classes)."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from envcheck.app.output import say
from envcheck.burn.coordinator import BurnRun
from envcheck.burn.stragglers import FleetLine
from envcheck.cluster.fleet.baseline_file import Stored
from envcheck.core.errors import ExitCode
from envcheck.core.result import Result, Status
from envcheck.core.signals import Interrupted


def load_baseline(spec: str | None) -> tuple[str | None, Stored | None]:
    """The stored baseline --baseline names (checked before any work: bad input exits 2), or (None, None)."""
    if not spec:
        return None, None
    from envcheck.app.fleet import stored_baseline

    return stored_baseline(spec)


def fleet_lines(stored: Stored | None, name: str | None, run: BurnRun) -> dict[str, FleetLine]:
    """The stored baseline's lines for this node's group (named as `envcheck fleet` names it, from the devices the
    workers reported); a note on stderr when the baseline holds no such group."""
    if stored is None:
        return {}
    from envcheck.cluster.fleet.nodes import group_name

    gpus = [str(w.hello.get("name")) for w in run.tally.workers.values() if w.hello.get("kind") == "cuda"]
    group = group_name(gpus, os.cpu_count())
    lines = {
        metric: FleetLine(base.median, base.mad, base.unit)
        for (metric, _), base in (stored.get(group) or {}).items()
        if metric.startswith("burn.")
    }
    if not lines:
        say(
            f"envcheck: note: --baseline {name} holds no burn baseline for {group!r}; throughput is judged against "
            "this node's own devices only",
            sys.stderr,
        )
    return lines


def exit_code(results: Sequence[Result], run: BurnRun, mode: str | None, verdict_to_stderr: bool) -> int:
    """A plain burn: 1 for a fault, 3 when the burn failed before judging, else 0. `--for preflight`: the cluster
    policy (a node fault 10, an image or config fault a warning), 3 when envcheck itself failed and found no node
    fault. Ctrl-C: 130 (a signal: 128+N), after the report."""
    if isinstance(run.signal, KeyboardInterrupt):
        return ExitCode.INTERRUPTED
    if isinstance(run.signal, Interrupted):
        return run.signal.exit_code
    own = any(r.status is Status.ERROR for r in results)
    if mode is None:
        if any(r.status is Status.FAIL for r in results):
            return ExitCode.FAILED
        return ExitCode.INTERNAL if own else ExitCode.OK
    from envcheck.cluster.mode_names import ModeName
    from envcheck.cluster.policy import decide

    decision = decide(results, ModeName(mode))
    for warning in decision.warnings:
        say(f"envcheck: warning: {warning}", sys.stderr)
    if decision.reason:
        say(decision.reason, sys.stderr if verdict_to_stderr else sys.stdout)
    if decision.code == ExitCode.OK and own:
        say(
            "envcheck: the burn could not judge the node (envcheck's own failure, not the node's)", sys.stderr
        )
        return ExitCode.INTERNAL
    return int(decision.code)
