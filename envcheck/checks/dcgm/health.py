"""dcgm.health: DCGM's health watches, as an operator set them, read with `dcgmi health -c -j` within a short budget.

Watches are the operator's configuration (`dcgmi health -g g -s a`; envcheck never sets them) and DCGM keeps them
per group, in the host engine's memory. They are read on DCGM's built-in groups where an operator sets them: `-g g`
(all GPUs, dcgmi's default), `-g a` (all entities) and `-g s` (NVSwitches, whose watches act only on a group that
holds switches); the result says which group held them. No group with watches ("Health watches not enabled") is a
skip that says how to set them, never a fault. The check loads nothing: it reads what the host engine sampled in
the background (rates over the last 60 s, XIDs since the host engine started: DcgmHealthWatch.cpp), so it runs on a
busy node too, and before dcgm.diag, whose load would show in the next minute's samples. dcgmi that does not answer
is the host engine's hang; one that cannot connect is read beside the node's processes (hostengine).
"""

from __future__ import annotations

import os
import re
import shutil
from typing import Any

from envcheck.checks.dcgm import health_doc
from envcheck.checks.dcgm.diag_json import Unread
from envcheck.checks.dcgm.health_doc import HealthDocument
from envcheck.checks.dcgm.health_verdict import UNREAD, verdict
from envcheck.checks.dcgm.hostengine import cannot_connect, connection_result, hang_result
from envcheck.checks.gpu_health.fabric_findings import wired
from envcheck.core.check import Context
from envcheck.core.result import Result, errored, skipped
from envcheck.probe import nvml_health
from envcheck.probe.gpu_usage import read_usage
from envcheck.probe.hang import run_in_child
from envcheck.probe.nvml import NVML_BUDGET_S, read_nvml
from envcheck.probe.nvml_fields import Fields, Missing, or_absent
from envcheck.probe.pci import SYSFS_PCI, pci_nvswitches

BUDGET_S = 10.0  # per dcgmi call: a health check reads retained samples and answers in well under a second
# DCGM's built-in groups an operator sets watches on (dcgmi/CommandLineParser.cpp, CheckGroupIdArgument).
GROUPS = (("g", "all GPUs"), ("a", "all entities"), ("s", "NVSwitches"))
WATCH_FIX = (
    "DCGM's health watches are not set on this node: dcgmi health -g g -s a (add -g s -s a on NVSwitch systems), "
    "once after nv-hostengine starts (it forgets them on restart); some watches need about 60 s of samples before "
    "the first meaningful check"
)


def _budget(ctx: Context) -> float:
    left = ctx.time_left()
    return round(max(min(BUDGET_S, left - 2.0) if left is not None else BUDGET_S, 1.0), 1)


def _version(dcgmi: str, ctx: Context) -> tuple[int, ...] | None:
    """dcgmi's own version (`dcgmi -v` prints "Version : 2.3.4" from DcgmBuildInfo before connecting): which
    writer printed the document."""
    got = run_in_child([dcgmi, "-v"], min(_budget(ctx), 5.0), "dcgmi -v", env=dict(os.environ))
    m = re.search(r"^Version\s*:\s*(\d+(?:\.\d+)*)", got.value or "", re.M)
    return tuple(int(p) for p in m.group(1).split(".")) if m else None


def old_writer(version: tuple[int, ...] | None, docs: dict[str, HealthDocument]) -> bool:
    """Whether 2.1-2.3's writer printed the documents: by dcgmi's version where it says; else (2.4.0-2.4.6 were
    not read, or no version) by that writer's mark, an entity whose "Errors" holds no row, or a GPU key that
    could be a health value (10, 20)."""
    if version is not None and version < (2, 4):
        return True
    if version is not None and version >= (2, 4, 7):
        return False
    entities = [e for d in docs.values() for e in d.entities]
    return any(e.errors_null or (e.group == "GPU" and e.key in ("10", "20")) for e in entities)


def _pci() -> dict[str, str]:
    """Each NVML index's PCI address (DCGM's GPU id is the NVML index); empty when NVML cannot tell."""
    usage = read_usage()
    if not isinstance(usage, dict):
        return {}
    return {str(u.get("index", 0)): key for key, u in usage.items()}


NVLINK_DOWN_WORDS = (
    "NvLink link"  # DCGM_FR_NVLINK_DOWN's message: "GPU %u's NvLink link %d is currently down"
)


def entity_rows(doc: HealthDocument) -> list[Any]:
    """Every system row of a document (to look for a link-down message before reading NVML about it)."""
    return [row for entity in doc.entities for row in entity.systems]


def nvlinks_wired(sysfs: str = SYSFS_PCI) -> bool | None:
    """Whether an NVSwitch baseboard wires the node's NVLinks by its own evidence (fabric_findings.wired: NVSwitches
    on the PCI bus, a GPU registered with a fabric); None when NVML cannot tell."""
    switches = pci_nvswitches(sysfs)
    count = len(switches) if isinstance(switches, list) else 0
    if count:
        return True
    state: dict[str, Any] = {"gpus": []}

    def body(pynvml: Any, progress: dict[str, Any]) -> None:
        fields = Fields(pynvml)
        total = fields.count()
        for i in range(total if isinstance(total, int) else 0):
            h = fields.handle(i)
            if isinstance(h, Missing):
                continue
            progress.update(call=f"NVML fabric and NVLinks of GPU {i}", gpu=i)
            state["gpus"].append(
                {
                    "fabric": or_absent(nvml_health.fabric(fields, h)),
                    "nvlink": or_absent(nvml_health.nvlinks(fields, h)),
                }
            )

    got = read_nvml(body, lambda exc: state.update(error=str(exc)), NVML_BUDGET_S)
    if got.hang is not None or state.get("error") or not state["gpus"]:
        return None
    return wired(state["gpus"], count)


def dcgm_health(ctx: Context) -> Result:
    """Read DCGM's health watches on its built-in groups and judge each incident by DCGM's own health result."""
    dcgmi = shutil.which("dcgmi")
    if dcgmi is None:
        return skipped("dcgmi not installed (DCGM's health watches are read where DCGM is)")
    measured: dict[str, Any] = {"budget_s": _budget(ctx)}
    docs: dict[str, HealthDocument] = {}
    not_set: list[str] = []
    refused: dict[str, str] = {}
    for letter, _what in GROUPS:
        call = f"dcgmi health -g {letter} -c -j"
        got = run_in_child(
            [dcgmi, "health", "-g", letter, "-c", "-j"], _budget(ctx), call, env=dict(os.environ)
        )
        if got.hang is not None:
            return hang_result(got.hang, measured)
        text = got.value or ""
        if cannot_connect(text):
            return connection_result(call, text, measured)
        if health_doc.NOT_ENABLED in text:
            not_set.append(letter)
            continue
        read = health_doc.find(text)
        if isinstance(read, Unread):
            refused[letter] = (
                f"exit {got.progress.get('returncode')}: {' '.join(text.split())[:200] or read.why}"
            )
            continue
        docs[letter] = read
    measured["watch_groups"] = {letter: what for letter, what in GROUPS if letter in docs}
    measured["groups_without_watches"] = not_set
    if refused:
        measured["unread"] = refused
    if docs:
        unhealthy = any(d.overall != "Healthy" or d.entities for d in docs.values())
        version = _version(dcgmi, ctx) if unhealthy else None
        measured["dcgmi_version"] = ".".join(map(str, version)) if version else None
        old = unhealthy and old_writer(version, docs)
        measured["writer"] = "2.1-2.3 (entity keys are health values)" if old else "2.4.7+"
        down = any(NVLINK_DOWN_WORDS in " ".join(e.text for e in entity_rows(d)) for d in docs.values())
        return verdict(docs, old, measured, _pci() if unhealthy else {}, nvlinks_wired() if down else None)
    if not_set:  # a group another one could not be read on (its error noted) holds no watches either way
        return skipped(
            f"DCGM's health watches are not enabled on {', '.join(f'-g {g}' for g in not_set)}: {WATCH_FIX}",
            measured=measured,
        )
    first = next(iter(refused.items()), ("g", "no output"))
    return errored(
        f"cannot judge: dcgmi health -g {first[0]} -c -j gave no health report ({first[1]})",
        measured=measured,
        code=UNREAD,
        remediation="run dcgmi health -g g -c by hand; DCGM's log: /var/log/nv-hostengine.log",
    )
