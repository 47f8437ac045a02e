"""DCGM's own diagnostic, where DCGM is installed: `dcgmi diag -r 1` (quick: a prolog, "normally lasting seconds")
or `-r 2` (`--level full`: an epilog, "approximately two minutes"; NVIDIA's dcgmi diag reference), with `-j`, within
a budget, on the GPUs no other process holds (`-i`: a GPU busy with another job fails DCGM's tests with "busy or
unavailable", which is not the GPU's fault; every GPU held: skipped). The document is read as every DCGM version wrote
it (diag_json) and judged by DCGM's own error severities (verdict): a failed test is a node finding `dcgm.diag.<test>`
naming the GPU's PCI address, a setting DCGM flags is `dcgm.config` (a warning, never a drain), and a refused, cut-off
or empty run cannot be judged. dcgmi that does not answer within the budget is a hung nv-hostengine
(`dcgm.hostengine_hang`, with the stuck process's state); under MIG the check skips (DCGM's diagnostic does not run on
MIG instances). No dcgmi on PATH: skipped with the reason. dcgmi that cannot connect is read beside the node's
processes (hostengine): not running, running but not answering, or not visible from a container.

dcgm.health (envcheck.checks.dcgm.health) reads DCGM's health watches beside it; both run on the node path, health
first, and the cluster policy takes the worse of the two by fault class.
"""

from __future__ import annotations

import os
import shutil

from envcheck.checks.dcgm.dcgm_sources import EVIDENCE, HEALTH_SYSTEMS
from envcheck.checks.dcgm.diag_json import Unread
from envcheck.checks.dcgm.document import parse
from envcheck.checks.dcgm.health import dcgm_health
from envcheck.checks.dcgm.hostengine import (
    HOSTENGINE_DOWN,
    HOSTENGINE_HANG,
    HOSTENGINE_UNREACHABLE,
    cannot_connect,
    connection_result,
    hang_result,
)
from envcheck.checks.dcgm.verdict import CONFIG, NO_RESULT, verdict
from envcheck.core.check import CheckSpec, Context
from envcheck.core.result import Result, errored, skipped
from envcheck.probe.gpu_usage import foreign, holder, read_usage
from envcheck.probe.hang import run_in_child
from envcheck.probe.system import is_absent, run_command

# Finding codes this package emits (each one is in envcheck.cluster.finding_codes.TABLE).
__all__ = [
    "CONFIG",
    "EVIDENCE",
    "HEALTH_SYSTEMS",
    "HOSTENGINE_DOWN",
    "HOSTENGINE_HANG",
    "HOSTENGINE_UNREACHABLE",
    "NO_RESULT",
    "dcgm_diag",
    "dcgm_health",
]

BUDGET_S = {1: 60.0, 2: 240.0}  # level 1 takes seconds, level 2 about two minutes (NVIDIA's reference)


def mig_gpus() -> list[str]:
    """Indexes of GPUs with MIG enabled, from nvidia-smi (empty when it is missing or says none)."""
    got = run_command(["nvidia-smi", "--query-gpu=index,mig.mode.current", "--format=csv,noheader"], 10.0)
    if is_absent(got) or isinstance(got, dict) or got.returncode != 0:
        return []
    return [
        line.split(",")[0].strip()
        for line in got.stdout.splitlines()
        if line.count(",") == 1 and line.split(",")[1].strip().lower() == "enabled"
    ]


def _in_use() -> tuple[list[str], list[int], dict[str, str]]:
    """The GPUs another process holds ('GPU 3: pid 4242 (python)'), the NVML indices of the others, and each NVML
    index's PCI address; nothing held and nothing listed when NVML cannot tell (DCGM then runs on every GPU)."""
    usage = read_usage()
    if not isinstance(usage, dict):
        return [], [], {}
    busy, free, pci = [], [], {}
    for key, u in sorted(usage.items(), key=lambda kv: int(kv[1].get("index", 0))):
        pci[str(u.get("index", 0))] = key
        others = foreign(u.get("processes"))
        if others:
            busy.append(f"GPU {u.get('index')}: {holder({'processes': others})}")
        else:
            free.append(int(u.get("index", 0)))
    return busy, free, pci


def _unread(got: Unread, call: str, text: str, returncode: object, measured: dict[str, object]) -> Result:
    """No test to judge: a host engine that is down, DCGM refusing MIG, DCGM's own runtime error, a cut-off or
    missing document. None of them is evidence against the node."""
    if cannot_connect(text):
        return connection_result(call, text, measured)
    if got.refusal is not None:
        measured["runtime_error"] = got.refusal
        if "MIG" in got.refusal:  # NvidiaValidationSuite.cpp: "Cannot run diagnostic: ... MIG ..."
            return skipped(
                f"DCGM does not run its diagnostic under this MIG configuration: {got.refusal[:200]}",
                measured=measured,
            )
        return errored(f"cannot judge: {call}: {got.refusal[:240]}", measured=measured, code=NO_RESULT)
    return errored(
        f"cannot judge: {call} (exit {returncode}) gave no diagnostic: {got.why}",
        measured=measured,
        code=NO_RESULT,
    )


def dcgm_diag(ctx: Context) -> Result:
    """Run DCGM's diagnostic (level 1, or 2 at --level full) within its budget and name what failed."""
    dcgmi = shutil.which("dcgmi")
    if dcgmi is None:
        return skipped("dcgmi not installed (DCGM's diagnostic runs where DCGM is)")
    mig = mig_gpus()
    if mig:
        return skipped(
            f"MIG is enabled on GPU {', '.join(mig)}: DCGM's diagnostic does not run on MIG instances; "
            "run it with MIG disabled (nvidia-smi -mig 0) in a maintenance window",
            measured={"mig_gpus": mig},
        )
    busy, free, pci = _in_use()
    if busy and not free:
        return skipped(
            f"every GPU is held by another process ({'; '.join(busy[:3])}): DCGM's diagnostic loads the "
            "GPUs it tests, so it does not run beside other jobs",
            measured={"busy": busy},
        )
    level = 2 if ctx.full else 1
    left = ctx.time_left()
    budget = round(max(min(BUDGET_S[level], left - 2.0) if left is not None else BUDGET_S[level], 1.0), 1)
    only = ["-i", ",".join(str(i) for i in free)] if busy else []  # dcgmi's --gpuList: the GPUs nobody holds
    call = " ".join(["dcgmi diag -r", str(level), "-j", *only])
    got = run_in_child([dcgmi, "diag", "-r", str(level), "-j", *only], budget, call, env=dict(os.environ))
    measured: dict[str, object] = {"level": level, "budget_s": budget, "busy": busy}
    if got.hang is not None:
        return hang_result(got.hang, measured)
    measured["returncode"] = got.progress.get("returncode")
    read = parse(got.value or "")
    if isinstance(read, Unread):
        return _unread(read, call, got.value or "", got.progress.get("returncode"), measured)
    return verdict(read, level, measured, pci)


CHECKS = (
    # Before dcgm.diag: the watches rate the last 60 s of samples, and the diagnostic's own load (power, clocks)
    # would show in them. It loads nothing, so it needs no GPU to itself.
    CheckSpec(
        "dcgm.health",
        dcgm_health,
        "DCGM's health watches as the operator set them (dcgmi health -c -j on -g g, a, s), "
        "judged by DCGM's own health results",
        timeout_s=40,
        group="dcgm",
        uses_gpu=False,
        node_order=2,
    ),
    CheckSpec(
        "dcgm.diag",
        dcgm_diag,
        "DCGM's own diagnostic (dcgmi diag -r 1, -r 2 at --level full), within a "
        "budget; a hung nv-hostengine named",
        timeout_s=BUDGET_S[2] + 10,
        group="dcgm",
        uses_gpu=True,
        node_order=3,
    ),
)
