"""DCGM's host engine as dcgmi and the node show it: dcgmi's connection error read beside the direct evidence of
the daemon (envcheck.probe.daemons: an nv-hostengine process where this process sees the host's processes).

dcgmi's words alone ("Error: unable to establish a connection to the specified host: localhost" / "Error: Unable to
connect to host engine. Host engine connection invalid/disconnected.", dcgmi/Command.cpp at every tag 2.1.4-4.6.0)
say only that nothing answered at that address. So: no nv-hostengine process among the host's processes is a host
engine that is not running; a process that is there is one that does not answer at dcgmi's address (another port or
a UNIX socket, still starting, or stuck); in a PID namespace of its own (a container) envcheck cannot see the host's
processes and says so. None of them is evidence against the node: DCGM cannot judge it then.
"""

from __future__ import annotations

import os
import re
from typing import Any

from envcheck.core.result import FaultClass, Result, errored, failed
from envcheck.probe.daemons import HOSTENGINE, daemon_state
from envcheck.probe.hang import STATES, describe, task_state

# Finding codes (each one is in envcheck.cluster.finding_codes.TABLE).
HOSTENGINE_DOWN = "dcgm.hostengine_down"
HOSTENGINE_UNREACHABLE = "dcgm.hostengine_unreachable"
HOSTENGINE_HANG = "dcgm.hostengine_hang"
HANG_FIX = (
    "nv-hostengine is hung: systemctl restart nvidia-dcgm (or kill nv-hostengine and start it again); "
    "if it hangs again, nvidia-smi -q (does the driver answer?) and dmesg | grep -i xid; drain and reboot"
)
START_FIX = "start it: systemctl enable --now nvidia-dcgm (or nv-hostengine)"
ADDRESS_FIX = (
    "compare the address nv-hostengine listens on (its -b/-p or --domain-socket options) with dcgmi's --host; "
    "journalctl -u nvidia-dcgm for why it does not answer; systemctl restart nvidia-dcgm"
)
UNSEEN_FIX = (
    "from a container, point dcgmi at the host's engine (--host <address>; a DaemonSet with hostNetwork reaches "
    "localhost:5555) or check nvidia-dcgm on the host: systemctl status nvidia-dcgm"
)
_CONNECTION = ("Unable to connect to host engine", "unable to establish a connection")


def cannot_connect(text: str) -> bool:
    """True when dcgmi's output is its connection error (Command.cpp)."""
    return any(words in text for words in _CONNECTION)


def state(proc: str = "/proc") -> dict[str, Any]:
    """The host engine's process evidence: `pids` (None: not visible from here), `alive`, and each process's state
    (a process stuck in the driver shows D and its wchan)."""
    got = daemon_state(HOSTENGINE, proc)
    out: dict[str, Any] = {"pids": got["pids"], "alive": got["alive"]}
    if got["pids"]:
        out["tasks"] = {str(p): task_state(os.path.join(proc, str(p))) for p in got["pids"][:4]}
    return out


def connection_result(call: str, text: str, measured: dict[str, Any], proc: str = "/proc") -> Result:
    """dcgmi could not reach the host engine: what the node's processes say of it, never a node fault."""
    seen = state(proc)
    measured["hostengine"] = seen
    where = re.search(r"connection to the specified host: (\S+)", text)
    address = where.group(1) if where else "its default address"
    said = " ".join(text.split())[:200]
    if seen["alive"] is False:
        return errored(
            f"{call}: nv-hostengine is not running (no nv-hostengine process among the host's processes); "
            f"dcgmi: {said}",
            measured=measured,
            code=HOSTENGINE_DOWN,
            remediation=START_FIX,
        )
    if seen["alive"]:
        pids = ", ".join(str(p) for p in seen["pids"])
        return errored(
            f"{call}: nv-hostengine is running (pid {pids}) but does not answer dcgmi at {address}; dcgmi: {said}",
            measured=measured,
            code=HOSTENGINE_UNREACHABLE,
            remediation=ADDRESS_FIX,
        )
    return errored(
        f"{call}: dcgmi cannot reach nv-hostengine at {address}, and whether nv-hostengine runs cannot be seen "
        f"from this PID namespace (a container sees only its own processes); dcgmi: {said}",
        measured=measured,
        code=HOSTENGINE_UNREACHABLE,
        remediation=UNSEEN_FIX,
    )


def hang_result(hang: dict[str, Any], measured: dict[str, Any], proc: str = "/proc") -> Result:
    """dcgmi did not return within its budget: the host engine's hang, with its process's own state; where no
    nv-hostengine process runs among the host's, the hang is dcgmi's own and the host engine is down."""
    seen = state(proc)
    measured["hang"], measured["hostengine"] = hang, seen
    if seen["alive"] is False:
        return errored(
            f"{describe(hang)}, and no nv-hostengine process runs among the host's processes: dcgmi's own hang, "
            "with no host engine to answer it",
            measured=measured,
            code=HOSTENGINE_DOWN,
            remediation=START_FIX,
        )
    tasks = seen.get("tasks") or {}
    said = [
        f"pid {pid} {STATES.get(t.get('state', ''), t.get('state', '?'))}"
        + (f", wchan {t['wchan']}" if t.get("wchan") else "")
        for pid, t in tasks.items()
        if t
    ]
    engine = f" (nv-hostengine {'; '.join(said)})" if said else ""
    return failed(
        f"{describe(hang)}: nv-hostengine is not answering{engine}",
        HANG_FIX,
        measured=measured,
        fault_class=FaultClass.NODE,
        code=HOSTENGINE_HANG,
    )
