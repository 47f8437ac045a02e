"""The exit policy of `envcheck run --for prolog|preflight|npd`, decided by each finding's fault class.

A cluster acts on a verifier's exit code: a Slurm prolog that exits non-zero drains the node, a
Kubernetes Job's podFailurePolicy matches exit codes, node-problem-detector reads 0/1/2. Only a `node`
fault may take a node out of service; an `image` or `config` fault is the user's to fix, and draining a
healthy node for it would be the worst outcome, so it is a warning (exit 0) in prolog and npd mode.
An ERROR with no class means envcheck itself failed (a check crashed or timed out): that is no evidence
against the node, so it never drains one either. The codes below are documented in docs/cluster.md and
are stable: change them only with a new major version.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from envcheck.checks.cuda.finding import CAPABILITIES, CONTAINER, VISIBLE_DEVICES
from envcheck.checks.cuda.verdict import GPU_COUNT
from envcheck.checks.gpu_health.node import GPU_LOST
from envcheck.cluster.mode_names import ModeName
from envcheck.core.errors import ExitCode
from envcheck.core.hardening import NOFILE_LOW, NPROC_LOW
from envcheck.core.result import FaultClass, Result, Status
from envcheck.core.text import one_line as text_one_line

OK = ExitCode.OK
NODE_FAULT = ExitCode.FAILED  # prolog and npd: a node fault (npd: "problem")
USAGE = ExitCode.USAGE  # bad input, every mode (npd reads 2 as "unknown", which is what it is)
NPD_UNKNOWN = ExitCode.NPD_UNKNOWN  # npd: envcheck could not judge the node (an unclassified ERROR)
PREFLIGHT_NODE = ExitCode.PREFLIGHT_NODE  # preflight: retry elsewhere (the node is at fault)
REASON_MAX = 200
# The job user's limits ran out (envcheck.core.hardening): `config`, never the node's; npd cannot judge the node then.
LIMIT_CODES = frozenset({NPROC_LOW, NOFILE_LOW})
# envcheck's own container keeps it from the GPUs (no GPU given, NVIDIA_DRIVER_CAPABILITIES without compute or
# utility, a CUDA_VISIBLE_DEVICES that hides them): `config`, never the node's; npd cannot judge the node then.
# CUDA_ERROR_NO_DEVICE that nothing explains (its table's class, config) is the same: envcheck saw no GPU there.
DEPLOYMENT_CODES = frozenset({CONTAINER, CAPABILITIES, VISIBLE_DEVICES, "cuda.error.100"})
LOST_GPU_FIX = (
    "check the node: nvidia-smi, `dmesg | grep -i xid` ('fallen off the bus'), lsmod | grep nvidia; "
    "reload the driver or reboot, then `scontrol update NodeName=... State=RESUME`"
)  # scontrol's Reason= is free text; keep it one short line


@dataclass(frozen=True)
class Decision:
    """The exit code, the one-line reason (empty when the node is fine) and warnings for the job's output."""

    code: ExitCode
    reason: str
    warnings: tuple[str, ...]


def one_line(result: Result, limit: int = REASON_MAX) -> str:
    """`[class] check: summary`, one line, at most `limit` characters, no quotes that break a shell."""
    who = result.fault_class.value if result.fault_class is not None else "envcheck"
    text = f"[{who}] {result.name}: {result.summary}"
    text = text_one_line(
        " ".join(text.replace('"', "'").split())
    )  # no control character from the environment
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _lost_gpu(result: Result, expect_gpus: int | None) -> bool:
    """A GPU-count shortfall under --expect-gpus: fewer GPUs than the node must have, or none at all."""
    if result.status is not Status.FAIL or result.fault_class is not FaultClass.CONFIG or not expect_gpus:
        return False
    if result.code != GPU_COUNT:
        return False  # e.g. cuda.container: envcheck's own container was given no GPU, which says nothing of them
    gpus = result.measured.get("gpus")
    return isinstance(gpus, int) and gpus < expect_gpus


def reclassify(results: Sequence[Result], mode: ModeName | None, expect_gpus: int | None) -> list[Result]:
    """In prolog, health and npd mode, a node that shows fewer GPUs than it must have (--expect-gpus) is a node
    fault: the admin said how many it has, so the missing ones are lost (fallen off the bus, driver unloaded).

    A container given no GPU at all (cuda.container: no /dev/nvidia*, no /proc/driver/nvidia inside) stays
    `config`: that is how envcheck's own container was started (an npd DaemonSet without the nvidia runtime, a
    containerised slurmd), and says nothing of the node's GPUs. In preflight mode (a pod) the pod spec can still be
    at fault: kept `config`."""
    if mode not in (ModeName.PROLOG, ModeName.NPD, ModeName.HEALTH) or any(
        r.code == CONTAINER for r in results
    ):
        return list(results)  # a container given no GPU counts none: that says nothing of the node's GPUs
    out = []
    for r in results:
        if _lost_gpu(r, expect_gpus):
            summary = f"{r.measured.get('gpus')} GPU(s) visible, {expect_gpus} expected: this node lost GPUs"
            r = replace(
                r, fault_class=FaultClass.NODE, summary=summary, remediation=LOST_GPU_FIX, code=GPU_LOST
            )
        out.append(r)
    return out


def decide(results: Sequence[Result], mode: ModeName) -> Decision:
    """The exit code and messages for `mode`; see docs/cluster.md for the table."""
    bad = [r for r in results if r.status.is_bad]
    node = [r for r in bad if r.fault_class is FaultClass.NODE]
    warnings = tuple(
        one_line(r)
        for r in results
        if r.status is Status.WARN or (r.status.is_bad and r.fault_class is not FaultClass.NODE)
    )
    if node:
        code = {
            ModeName.PROLOG: NODE_FAULT,
            ModeName.NPD: NODE_FAULT,
            ModeName.HEALTH: NODE_FAULT,
            ModeName.PREFLIGHT: PREFLIGHT_NODE,
        }[mode]
        more = f" (+{len(node) - 1} more node faults)" if len(node) > 1 else ""
        reason = one_line(node[0], REASON_MAX - len(more)) + more  # the whole line stays within REASON_MAX
        return Decision(code, reason, warnings)
    # Image and config faults never fail a node's gate, in any mode: exit 0 with the warnings in the job's output.
    if mode is ModeName.NPD and any(
        r.fault_class is None or r.code in LIMIT_CODES | DEPLOYMENT_CODES for r in bad
    ):
        return Decision(NPD_UNKNOWN, "", warnings)
    return Decision(OK, "", warnings)
