"""The CUDA driver API without torch: cuInit, the device count, and per GPU a context and a small copy, read in a
child process (probe/cuda_driver_child.py, stdlib only) within a budget through probe.hang.run_in_child. A cuInit
that does not return is evidence (the call, the budget, the child's state and wchan), never a hung envcheck."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from envcheck.probe.hang import run_in_child

CHILD = Path(__file__).with_name("cuda_driver_child.py")
# Inside the prolog's and npd's own limits (slurmd kills a HealthCheckProgram after 60 s), well above a healthy
# cuInit on an 8-GPU node (about 1-3 s with persistence mode on).
CUDA_BUDGET_S = 20.0
SKIP_VAR = (
    "ENVCHECK_SKIP_PCI"  # the child's input: GPUs (PCI keys, comma-separated) to list without a context
)


def device_nodes(dev: str = "/dev") -> list[str]:
    """The NVIDIA device nodes present: nvidiactl, nvidia-uvm, nvidia0...; [] when none (or /dev unreadable)."""
    try:
        return sorted(
            n for n in os.listdir(dev) if re.fullmatch(r"nvidia(\d+|ctl|-uvm|-uvm-tools|-modeset)", n)
        )
    except OSError:
        return []


def _lines(text: str) -> list[dict[str, Any]]:
    out = []
    for line in text.splitlines():
        try:
            message = json.loads(line)
        except ValueError:
            continue  # a banner libcuda or a sitecustomize printed
        if isinstance(message, dict):
            out.append(message)
    return out


def probe(
    budget_s: float = CUDA_BUDGET_S, env: dict[str, str] | None = None, skip: Sequence[str] = ()
) -> dict[str, Any]:
    """{'done': the child's result} or {'hang': evidence (call, budget, state, wchan, gpu)} or {'error': text};
    always 'dev': the NVIDIA device nodes. `skip`: PCI keys ('0000:18:00') of GPUs to leave without a context
    (another process holds them); the child still lists them, marked 'skipped'."""
    out: dict[str, Any] = {"dev": device_nodes()}
    argv = [sys.executable, "-I", "-S", str(CHILD)]
    child_env = dict(os.environ if env is None else env)
    child_env.pop(SKIP_VAR, None)
    if skip:
        child_env[SKIP_VAR] = ",".join(skip)
    try:
        got = run_in_child(argv, budget_s, "cuInit", env=child_env)
    except OSError as exc:  # cannot start a process (nproc limit): envcheck's own failure, said as such
        out["error"] = f"could not start the CUDA probe: {exc.strerror or exc}"
        return out
    messages = _lines(got.value if got.value is not None else str(got.progress.get("output") or ""))
    if got.hang is not None:
        calls = [m for m in messages if "call" in m]
        hang = dict(got.hang)
        if calls:  # the call the child announced last is the one that never returned
            hang["call"], hang["gpu"] = calls[-1]["call"], calls[-1].get("gpu")
        out["hang"] = hang
        return out
    done = next((m["done"] for m in messages if isinstance(m.get("done"), dict)), None)
    if done is None:
        code = got.progress.get("returncode")
        tail = (got.value or "").strip().splitlines()[-1:] or ["no output"]
        last = next((m for m in reversed(messages) if "call" in m), None)
        during = f" during {last['call']}" if last else ""
        out["error"] = f"the CUDA probe exited with {code}{during}: {tail[0][:200]}"
        out["crashed_in"] = last
        return out
    out["done"] = done
    return out
