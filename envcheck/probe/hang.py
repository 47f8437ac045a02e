"""A driver call that does not return is evidence: run it within a budget and, when it overruns, say which call,
the budget, and the kernel's view of the stuck task (its state and, in D state, /proc/.../wchan).

Two shapes: `call_in_thread` (NVML through ctypes releases the GIL, so a daemon thread can be given up on) and
`run_in_child` (a child process, e.g. cuInit through ctypes: killed at the budget; a child that cannot be
killed, stuck in uninterruptible sleep, is reported and left, never waited on past a short grace).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")
KILL_GRACE_S = 0.5  # after SIGKILL: a killable child is gone within milliseconds
STATES = {
    "R": "running",
    "S": "sleeping",
    "D": "uninterruptible sleep (D)",
    "T": "stopped",
    "t": "traced",
    "Z": "zombie",
    "X": "dead",
    "I": "idle",
}


def task_state(task_dir: str) -> dict[str, str]:
    """{'state': 'D', 'state_text': ..., 'wchan': ...} of /proc/PID or /proc/PID/task/TID; {} if it is gone."""
    try:
        with open(os.path.join(task_dir, "stat"), encoding="utf-8", errors="replace") as f:
            stat = f.read()
    except OSError:
        return {}
    code = stat.rsplit(")", 1)[-1].split()[0] if ")" in stat else "?"  # comm may hold spaces and parentheses
    out = {"state": code, "state_text": STATES.get(code, code)}
    try:
        with open(os.path.join(task_dir, "wchan"), encoding="utf-8", errors="replace") as f:
            wchan = f.read().strip()
    except OSError:
        wchan = ""
    if wchan and wchan != "0":
        out["wchan"] = wchan[:64]
    return out


def hang_evidence(call: str, budget_s: float, task_dir: str | None) -> dict[str, Any]:
    """The evidence record of a call that overran its budget (the task's state when it can still be read)."""
    evidence: dict[str, Any] = {"call": call, "budget_s": budget_s}
    if task_dir:
        evidence.update(task_state(task_dir))
    return evidence


def stuck_in_kernel(evidence: dict[str, Any]) -> bool:
    """True when the overrunning task was in uninterruptible sleep (D: waiting inside the driver, it cannot even
    be killed) or could not be killed: evidence of a wedged driver. Sleeping (S) or running (R) is a call that
    was still working, e.g. a cold GPU initialisation with persistence mode off."""
    return evidence.get("state") == "D" or bool(evidence.get("left_running"))


def describe(evidence: dict[str, Any]) -> str:
    """'nvmlInit did not return within 15 s (thread in uninterruptible sleep (D), wchan nv_wait...)'."""
    where = [evidence["state_text"]] if evidence.get("state_text") else []
    if evidence.get("wchan"):
        where.append(f"wchan {evidence['wchan']}")
    if evidence.get("left_running"):
        where.append(f"pid {evidence.get('pid')} could not be killed and was left")
    tail = f" ({', '.join(where)})" if where else ""
    return f"{evidence['call']} did not return within {evidence['budget_s']:g} s{tail}"


@dataclass
class Budgeted(Generic[T]):
    """A budgeted call's value, or the evidence that it hung (value None then)."""

    value: T | None = None
    hang: dict[str, Any] | None = None
    progress: dict[str, Any] = field(default_factory=dict)  # what the body recorded before it hung


def call_in_thread(body: Callable[[dict[str, Any]], T], budget_s: float, call: str) -> Budgeted[T]:
    """body(progress) in a daemon thread; on overrun, the evidence names `progress['call']` (or `call`) and the
    thread's state. The thread is left behind (it ends with the process); nothing waits past the budget."""
    out: Budgeted[T] = Budgeted()
    tid: list[int] = []

    def run() -> None:
        tid.append(threading.get_native_id())
        out.value = body(out.progress)

    reader = threading.Thread(target=run, name=f"envcheck-{call}", daemon=True)
    reader.start()
    reader.join(budget_s)
    if reader.is_alive():
        task = f"/proc/self/task/{tid[0]}" if tid else None
        out.value = None
        out.hang = hang_evidence(str(out.progress.get("call") or call), budget_s, task)
        out.hang["where"] = "thread"
    return out


def run_in_child(
    argv: list[str],
    budget_s: float,
    call: str,
    env: dict[str, str] | None = None,
    kill: Callable[[int], None] = lambda pid: os.killpg(pid, signal.SIGKILL),
) -> Budgeted[str]:
    """argv's stdout within the budget, or the evidence of its hang. At the budget the child's state is read,
    then it is killed; if it is still there after KILL_GRACE_S (D state: the kernel holds it), it is left."""
    out: Budgeted[str] = Budgeted()
    child = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=env,
        text=True,
        errors="replace",
        start_new_session=True,
    )
    try:
        text, _ = child.communicate(timeout=budget_s)
        out.value = text
        out.progress["returncode"] = child.returncode
        return out
    except subprocess.TimeoutExpired as exc:  # what it printed before it hung (e.g. the call it was making)
        partial = exc.output or b""
        out.progress["output"] = (
            partial.decode(errors="replace") if isinstance(partial, bytes) else str(partial)
        )
        out.hang = hang_evidence(call, budget_s, f"/proc/{child.pid}")
        out.hang.update(where="child", pid=child.pid)
    try:
        kill(child.pid)
    except OSError:
        pass
    stop = time.monotonic() + KILL_GRACE_S
    while child.poll() is None and time.monotonic() < stop:
        time.sleep(0.02)
    if child.returncode is None:
        out.hang["left_running"] = True  # unkillable: reported, never waited on
        child.returncode = -9  # stops Popen's destructor from warning; the kernel reaps it when it wakes
        if child.stdout:
            child.stdout.close()
    return out
