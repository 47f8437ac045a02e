"""dcgm.diag's verdict from a read document: what each DCGM test says of the node, by DCGM's own error severities.

A test's status alone does not tell (dcgmi writes "Fail" for a warning too), so each Fail or Warn is weighed by its
errors (envcheck.checks.dcgm.error_codes.kind): an error DCGM isolates, resets or triages the GPU for, or a Fail with no
error DCGM classed, is the node's (FAIL, drains); a 'monitor' error warns; errors that are all DCGM's own failures
leave the node unjudged (ERROR, no class); errors that are all settings (persistence mode, ECC off, a power limit, a
test disabled or skipped) warn as the node's configuration, never as its hardware. Skip, Not Run and Not Supported
are never a fault. A GPU is named by its DCGM id, the PCI address of that NVML index (DCGM's GPU id is the NVML
index: dcgmlib/src/DcgmCacheManager.cpp) and the serial the document gives.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envcheck.checks.dcgm.diag_json import Diagnostic, TestOutcome
from envcheck.core.result import FaultClass, Result, errored, failed, first_of, passed, warned

CONFIG = "dcgm.config"  # DCGM flagged a setting of the node (DCGM_ERROR_CONFIG), not its hardware
NO_RESULT = "dcgm.no_result"
TEST_FIX = (
    "DCGM's diagnostic failed on this node: drain it; rerun `dcgmi diag -r 3` for detail; reset the GPU "
    "(nvidia-smi -r -i N) or reboot; RMA the GPU if it fails again"
)
CONFIG_FIX = (
    "a setting, not the hardware: apply DCGM's own suggestion in its message, then rerun dcgmi diag -r 1"
)
WARN_FIX = "see DCGM's message; rerun dcgmi diag after fixing it"


def judge(test: TestOutcome) -> str:
    """'fail', 'warn', 'config', 'internal', 'unknown', 'pass' or 'skip' for one test."""
    if test.status not in ("fail", "warn"):
        return test.status
    kinds = {e.kind for e in test.errors}
    if not kinds or kinds & {"fault", "unknown"}:
        return test.status  # DCGM's word stands where no severity says otherwise
    if "monitor" in kinds:
        return "warn"
    return "internal" if "internal" in kinds else "config"


def _gpu(gid: str, pci: Mapping[str, str], serials: Mapping[str, str]) -> str:
    where = [w for w in (pci.get(gid), f"serial {serials[gid]}" if gid in serials else None) if w]
    return f"GPU {gid}" + (f" ({', '.join(where)})" if where else "")


def line(test: TestOutcome, verdict: str, pci: Mapping[str, str], serials: Mapping[str, str]) -> str:
    """ "DCGM test 'memory' (Hardware) failed on GPU 1 (0000:18:00, serial 1650...): <DCGM's first message>"."""
    word = {"fail": "failed", "warn": "warned", "config": "flagged a setting", "internal": "could not run"}
    word["unknown"] = "gave a status word envcheck does not know"
    on = [_gpu(g, pci, serials) for g in test.gpus] + test.entities
    said = [e.text for e in test.errors] or [f"status {test.status}"]
    where = f" on {', '.join(on)}" if on else ""
    return f"DCGM test '{test.name}' ({test.category}) {word.get(verdict, verdict)}{where}: {said[0]}"


def verdict(
    diag: Diagnostic, level: int, measured: dict[str, Any], pci: Mapping[str, str] | None = None
) -> Result:
    """The check's result for a whole document (`pci`: each DCGM GPU id's PCI address, from NVML)."""
    pci = pci or {}
    judged = [(t, judge(t)) for t in diag.tests]
    measured["tests"] = {t.name: v for t, v in judged}
    measured["dcgm_version"] = diag.version
    measured["findings"] = [
        {
            "test": t.name,
            "verdict": v,
            "gpus": t.gpus,
            "pci": [pci[g] for g in t.gpus if g in pci],
            "entities": t.entities,
            "messages": [e.text for e in t.errors][:3],
            "error_ids": t.error_ids,
            "kinds": sorted({e.kind for e in t.errors}),  # by DCGM's severity and category of each error
        }
        for t, v in judged
        if v not in ("pass", "skip")
    ]
    by = {v: [t for t, tv in judged if tv == v] for v in ("fail", "internal", "unknown", "warn", "config")}
    lines = {v: [line(t, v, pci, diag.serials) for t in tests] for v, tests in by.items()}
    if by["fail"]:
        return failed(
            first_of(lines["fail"]),
            TEST_FIX,
            measured=measured,
            fault_class=FaultClass.NODE,
            code=by["fail"][0].code,
        )
    unjudged = lines["internal"] + lines["unknown"]
    if unjudged:
        return errored(
            f"cannot judge: {first_of(unjudged)}",
            measured=measured,
            code=NO_RESULT,
            remediation="rerun dcgmi diag -r 1 by hand; DCGM's logs: /var/log/nv-hostengine.log, nvvs.log",
        )
    if by["warn"]:
        return warned(
            first_of(lines["warn"]),
            WARN_FIX,
            measured=measured,
            fault_class=FaultClass.NODE,
            code=by["warn"][0].code,
        )
    if by["config"]:
        return warned(
            first_of(lines["config"]) + " (a setting, not the hardware)",
            CONFIG_FIX,
            measured=measured,
            fault_class=FaultClass.NODE,
            code=CONFIG,
        )
    return passed(
        f"DCGM diagnostic level {level}: {len(diag.tests)} test(s) passed or skipped", measured=measured
    )
