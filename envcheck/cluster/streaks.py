"""No flapping in `--for health`: a soft finding (cluster.severity) drains only after it repeats in N consecutive health
runs (`--drain-after`, default 3), a hard one at once; a node envcheck drained resumes only after M consecutive clean
runs (`--resume-after`, default 2). The counts live in a small JSON state file beside the prolog's
(`health-streaks.json` in the folder of ENVCHECK_SLURM_STATE, or ENVCHECK_HEALTH_STATE), replaced atomically.

A soft finding's streak counts the runs that included its check: a run that did not run that check neither extends
nor resets it; a run that ran the check without the finding resets it. A run is clean when it found no node finding
that drains at once and no soft finding at all. The health mode calls `apply` before the exit policy decides
(envcheck.app.cluster_mode.finish) and passes `Held.resume_hold` to the drain/resume step (slurm_node.act).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from envcheck.cluster.mode_names import DRAIN_AFTER, RESUME_AFTER
from envcheck.cluster.severity import SOFT, all_soft, severity
from envcheck.cluster.slurm_node import state_file
from envcheck.core.result import FaultClass, Result, Status

STATE_VAR = "ENVCHECK_HEALTH_STATE"
STATE_NAME = "health-streaks.json"
STATE_VERSION = 1


@dataclass(frozen=True)
class Policy:
    """N and M."""

    drain_after: int = DRAIN_AFTER
    resume_after: int = RESUME_AFTER


@dataclass
class State:
    """What the last health runs left: each soft code's streak (its check, runs in a row, first and last seen), the
    clean runs in a row, and how many runs were counted."""

    soft: dict[str, dict[str, Any]] = field(default_factory=dict)
    clean_runs: int = 0
    runs: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The state file's JSON."""
        return {
            "version": STATE_VERSION,
            "updated": time.time(),
            "runs": self.runs,
            "clean_runs": self.clean_runs,
            "soft": self.soft,
        }

    @classmethod
    def from_dict(cls, data: Any) -> State:
        """The state from its JSON; ValueError when it is not one."""
        if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
            raise ValueError("not a health-streaks state of this envcheck")
        soft = data.get("soft")
        if not isinstance(soft, dict) or not all(
            isinstance(v, dict) and isinstance(v.get("runs"), int) and isinstance(v.get("check"), str)
            for v in soft.values()
        ):
            raise ValueError("its soft findings are malformed")
        clean, runs = data.get("clean_runs"), data.get("runs")
        if not isinstance(clean, int) or not isinstance(runs, int) or clean < 0 or runs < 0:
            raise ValueError("its run counts are malformed")
        return cls(dict(soft), clean, runs)


@dataclass(frozen=True)
class Held:
    """The results as the exit policy must judge them, the new state, whether this run was clean, lines to say, and
    why an envcheck drain must not be resumed yet (None: it may)."""

    results: list[Result]
    state: State
    clean: bool
    notes: list[str]
    resume_hold: str | None
    problems: list[str] = field(default_factory=list)


def codes_of(result: Result) -> list[str]:
    """The result's code and every finding code it lists (`measured.codes`, as gpu.health and perf.relative keep)."""
    listed: list[Any] = result.measured["codes"] if isinstance(result.measured.get("codes"), list) else []
    return list(dict.fromkeys(str(c) for c in [result.code, *listed] if c))


def is_soft(result: Result) -> bool:
    """A node finding (warning or failure) whose codes are all soft."""
    return (
        result.fault_class is FaultClass.NODE
        and result.status in (Status.WARN, Status.FAIL)
        and all_soft(codes_of(result))
    )


def is_hard(result: Result) -> bool:
    """A node failure that drains at once (any code not listed soft)."""
    return result.fault_class is FaultClass.NODE and result.status is Status.FAIL and not is_soft(result)


def hold(results: Sequence[Result], previous: State, policy: Policy, now: float) -> Held:
    """The pure step: count this run into `previous` and say how each soft finding is to be judged now."""
    ran = {r.name for r in results if r.status in (Status.PASS, Status.WARN, Status.FAIL)}
    soft_now = {code: r.name for r in results if is_soft(r) for code in codes_of(r) if severity(code) is SOFT}
    notes, soft = [], {}
    for code, entry in previous.soft.items():
        if code not in soft_now and entry["check"] in ran:
            notes.append(f"{code} is gone after {entry['runs']} run(s) in a row: its streak starts again")
        elif code not in soft_now:
            soft[code] = entry  # its check did not run: no evidence either way
    for code, check in soft_now.items():
        before = previous.soft.get(code) or {}
        soft[code] = {
            "check": check,
            "runs": int(before.get("runs", 0)) + 1,
            "first": before.get("first", now),
            "last": now,
        }
    clean = not soft_now and not any(is_hard(r) for r in results)
    state = State(soft, previous.clean_runs + 1 if clean else 0, previous.runs + 1)
    effective = []
    for r in results:
        if is_soft(r):
            streak = max(soft[c]["runs"] for c in codes_of(r) if c in soft)
            if streak >= policy.drain_after:
                r = replace(r, status=Status.FAIL, summary=f"{r.summary} (in {streak} health runs in a row)")
            else:
                r = replace(
                    r,
                    status=Status.WARN,
                    summary=f"{r.summary} (soft: {streak} of {policy.drain_after} "
                    "health runs in a row before a drain)",
                )
        effective.append(r)
    wait = (
        None
        if state.clean_runs >= policy.resume_after
        else f"clean run {state.clean_runs} of {policy.resume_after} before a resume"
    )
    return Held(effective, state, clean, notes, wait)


def state_path(env: Mapping[str, str]) -> Path:
    """ENVCHECK_HEALTH_STATE, else health-streaks.json beside the prolog's state file."""
    return Path(env.get(STATE_VAR) or state_file(env).with_name(STATE_NAME))


def load(path: Path) -> tuple[State, str | None]:
    """The saved state (empty when there is none), and a note when it could not be read."""
    try:
        return State.from_dict(json.loads(path.read_text())), None
    except FileNotFoundError:
        return State(), None
    except (OSError, ValueError) as exc:
        why = getattr(exc, "strerror", None) or str(exc)
        return State(), f"health streaks in {path} unreadable ({why}): counting from this run"


def save(path: Path, state: State) -> str | None:
    """Replace the state file atomically (a temp file beside it, fsynced, renamed); the problem, if any."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w") as f:
            f.write(json.dumps(state.to_dict()) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        return f"health streaks not kept in {path}: {exc.strerror or exc}; soft findings cannot reach a drain"
    return None


KEEPERS = (
    STATE_VAR,
    "ENVCHECK_SLURM_STATE",
    "SLURMD_NODENAME",
)  # a health check run as slurmd runs it, or told where


def apply(
    results: Sequence[Result], env: Mapping[str, str], policy: Policy, now: float | None = None
) -> Held:
    """Load the state, count this run, save it: the health mode's hook (see the module docstring). Kept only when the
    health check runs as slurmd runs it (SLURMD_NODENAME, which docs/cluster/slurm-health.sh always sets) or is told
    where (ENVCHECK_HEALTH_STATE, ENVCHECK_SLURM_STATE); otherwise every run is a first run and nothing is written."""
    if not any(env.get(k) for k in KEEPERS):
        held = hold(results, State(), policy, time.time() if now is None else now)
        unkept = [
            f"no health streaks kept ({', '.join(KEEPERS)} unset): a soft finding cannot build a streak here"
        ]
        return replace(held, notes=unkept if any(is_soft(r) for r in results) else [])
    path = state_path(env)
    previous, note = load(path)
    held = hold(results, previous, policy, time.time() if now is None else now)
    problem = save(path, held.state)
    return replace(held, notes=([note] if note else []) + held.notes, problems=[problem] if problem else [])
