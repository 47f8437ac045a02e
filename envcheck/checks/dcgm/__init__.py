"""DCGM's own diagnostic, where DCGM is installed: `dcgmi diag -r 1` (quick: a prolog, "normally lasting seconds")
or `-r 2` (`--level full`: an epilog, "approximately two minutes"; NVIDIA's dcgmi diag reference), with `-j`, within
a budget, on the GPUs no other process holds (`-i`: a GPU busy with another job fails DCGM's tests with "busy or
unavailable", which is not the GPU's fault; every GPU held: skipped). A failed DCGM test is a node finding with code `dcgm.diag.<test>`; dcgmi that does not answer within the
budget is a hung nv-hostengine (`dcgm.hostengine_hang`, with the stuck process's state); under MIG the check skips
(DCGM's diagnostic does not run on MIG instances). No dcgmi on PATH: skipped with the reason.
"""

from __future__ import annotations

import os
import shutil

from envcheck.checks.dcgm.diag_json import TestOutcome, parse
from envcheck.core.check import CheckSpec, Context
from envcheck.core.result import FaultClass, Result, errored, failed, first_of, passed, skipped, warned
from envcheck.probe.gpu_usage import foreign, holder, read_usage
from envcheck.probe.hang import describe, run_in_child
from envcheck.probe.system import is_absent, run_command

# Finding codes this module emits (each one is in envcheck.cluster.finding_codes.TABLE).
HOSTENGINE_DOWN = "dcgm.hostengine_down"
HOSTENGINE_HANG = "dcgm.hostengine_hang"
NO_RESULT = "dcgm.no_result"

BUDGET_S = {1: 60.0, 2: 240.0}  # level 1 takes seconds, level 2 about two minutes (NVIDIA's reference)
HANG_FIX = (
    "nv-hostengine is hung: systemctl restart nvidia-dcgm (or kill nv-hostengine and start it again); "
    "if it hangs again, nvidia-smi -q (does the driver answer?) and dmesg | grep -i xid; drain and reboot"
)
TEST_FIX = (
    "DCGM's diagnostic failed on this node: drain it; rerun `dcgmi diag -r 3` for detail; reset the GPU "
    "(nvidia-smi -r -i N) or reboot; RMA the GPU if it fails again"
)


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


def _in_use() -> tuple[list[str], list[int]]:
    """The GPUs another process holds ('GPU 3: pid 4242 (python)') and the NVML indices of the others; nothing
    held and nothing listed when NVML cannot tell (DCGM then runs on every GPU, as before)."""
    usage = read_usage()
    if not isinstance(usage, dict):
        return [], []
    busy, free = [], []
    for u in sorted(usage.values(), key=lambda u: int(u.get("index", 0))):
        others = foreign(u.get("processes"))
        if others:
            busy.append(f"GPU {u.get('index')}: {holder({'processes': others})}")
        else:
            free.append(int(u.get("index", 0)))
    return busy, free


def _line(t: TestOutcome) -> str:
    on = f" on GPU {', '.join(t.gpus)}" if t.gpus else ""
    why = f": {t.messages[0]}" if t.messages else ""
    return f"DCGM test '{t.name}' ({t.category}) {'failed' if t.status == 'fail' else 'warned'}{on}{why}"


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
    busy, free = _in_use()
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
        measured["hang"] = got.hang
        return failed(
            f"{describe(got.hang)}: nv-hostengine is not answering",
            HANG_FIX,
            measured=measured,
            fault_class=FaultClass.NODE,
            code=HOSTENGINE_HANG,
        )
    outcomes = parse(got.value or "")
    if isinstance(outcomes, str) and "Unable to connect to host engine" in (got.value or ""):
        return errored(
            f"{call}: nv-hostengine is not running here ({' '.join((got.value or '').split())[:160]})",
            measured=measured,
            code=HOSTENGINE_DOWN,
            remediation="start it: systemctl enable --now nvidia-dcgm (or nv-hostengine)",
        )
    if isinstance(
        outcomes, str
    ):  # dcgmi ran but said no verdict (no host engine, bad version): not the node's
        return errored(
            f"{call} (exit {got.progress.get('returncode')}) gave no diagnostic: {outcomes}",
            measured=measured,
            code=NO_RESULT,
        )
    bad = [t for t in outcomes if t.status == "fail"]
    warn = [t for t in outcomes if t.status == "warn"]
    measured["tests"] = {t.name: t.status for t in outcomes}
    measured["findings"] = [
        {
            "test": t.name,
            "code": t.code,
            "status": t.status,
            "gpus": t.gpus,
            "messages": t.messages[:3],
            "error_ids": t.error_ids,
        }
        for t in bad + warn
    ]
    if bad:
        return failed(
            first_of([_line(t) for t in bad]),
            TEST_FIX,
            measured=measured,
            fault_class=FaultClass.NODE,
            code=bad[0].code,
        )
    if warn:
        return warned(
            first_of([_line(t) for t in warn]),
            "see DCGM's message; rerun dcgmi diag after fixing it",
            measured=measured,
            fault_class=FaultClass.NODE,
            code=warn[0].code,
        )
    return passed(
        f"DCGM diagnostic level {level}: {len(outcomes)} test(s) passed or skipped", measured=measured
    )


CHECKS = (
    CheckSpec(
        "dcgm.diag",
        dcgm_diag,
        "DCGM's own diagnostic (dcgmi diag -r 1, -r 2 at --level full), within a "
        "budget; a hung nv-hostengine named",
        timeout_s=BUDGET_S[2] + 10,
        group="dcgm",
        uses_gpu=True,
        node_order=2,
    ),
)
