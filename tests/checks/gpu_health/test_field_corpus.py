"""Every verdict rule of the node path against the field corpus: real kernel-log excerpts from public threads
(tests/checks/gpu_health/field_records, cited there), each written back as /dev/kmsg records, dmesg text and journal
lines, judged by gpu.health as a node mode judges it.

Staged, and only that (no NVIDIA driver can exist here): the node around each log (the PCI bus, the driver's GPU list,
NVML's answers, the versions of the driver's two halves), from the thread or from what the driver does in that class
of failure (field_corpus.node_state). Real: every excerpt, verbatim, and envcheck's reader, scanner and verdict."""

from __future__ import annotations

from typing import Any

import pytest

from envcheck.checks.gpu_health.bundle_shape import validate
from envcheck.checks.gpu_health.kernel_events import scan
from envcheck.checks.gpu_health.verdict import verdict
from envcheck.core.check import CheckOptions, Context
from envcheck.core.result import FaultClass, Result, Status
from tests.checks.gpu_health.field_corpus import FORMS, Case, load, node_state, staged
from tests.staging.gpu_node import staged_node

CASES = load()
HEALTH = Context(options=CheckOptions(node_path=True, cluster_mode="health"))


def judge(case: Case, form: str) -> tuple[Result, dict[str, Any]]:
    """gpu.health's verdict on the node the case implies, its kernel log written in `form`."""
    found = scan(FORMS[form](case.records))
    data = node_state(case) | {
        "kernel_log": {
            "source": "/dev/kmsg",
            "error": None,
            "xid": found["xid"],
            "bus": found["bus"],
            "driver": found["driver"],
            "window": {"after_seq": None, "since_s": None},
        }
    }
    validate(data, "gpu_health")
    return verdict(data, HEALTH), data


def test_the_corpus_is_large_varied_and_cited() -> None:
    sources = {c.source.split("#")[0] for c in CASES}
    assert len(CASES) >= 40 and len(sources) >= 20
    assert {c.published_as for c in CASES} >= {"dmesg", "dmesg-T", "journal", "syslog", "kmsg", "plain"}
    assert any(c.grepped for c in CASES) and any(not c.truth["node_fault"] for c in CASES)
    assert all(c.source.startswith("https://") and c.records for c in CASES)


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("case", CASES, ids=[c.name[:3] for c in CASES])
def test_each_case_gets_its_truths_verdict_in_every_record_form(case: Case, form: str) -> None:
    result, _ = judge(case, form)
    node = result.status is Status.FAIL and result.fault_class is FaultClass.NODE
    assert node is bool(case.truth["node_fault"]), (
        f"{case.name} ({case.source}): {result.status} {result.summary}"
    )


@pytest.mark.parametrize("case", [c for c in CASES if c.truth["node_fault"]], ids=lambda c: c.name[:3])
def test_a_node_fault_names_the_gpu_the_log_names(case: Case) -> None:
    result, _ = judge(case, "kmsg")
    blamed = " ".join(f["gpu"] for f in result.measured["findings"]).lower()
    if case.truth["cause"] == "nvswitch":  # the fabric's fault: the finding names the switch
        assert "nvswitch pci" in blamed and result.code == "nvswitch.fatal"
        return
    named = [g for g in case.truth["gpus"] if g.split(":", 1)[1] in case.excerpt.lower()]
    if not named:
        pytest.skip("the excerpt names no GPU by PCI address (the thread does)")
    assert any(g.split(":", 1)[1] in blamed for g in named), result.measured["findings"]


@pytest.mark.parametrize("case", CASES, ids=[c.name[:3] for c in CASES])
def test_each_case_staged_on_a_node_gets_its_truths_exit_code(
    case: Case, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The whole path as a prolog runs it: the case's /dev/kmsg records in /dev/kmsg, its PCI bus in sysfs, its
    driver and NVML state (tests/staging/gpu_node.py), `envcheck run --for prolog` reading them for real."""
    with staged_node(staged(case), tmp_path_factory.mktemp("corpus")) as node:
        done, results = node.envcheck("--for", "prolog")
    said = f"{case.name} ({case.source}): exit {done.returncode}\n" + "\n".join(
        f"{n}: {r['status']} {r.get('code')} {r['summary'][:200]}"
        for n, r in results.items()
        if n != "_report"
    )
    assert done.returncode == (1 if case.truth["node_fault"] else 0), said + done.stderr[-800:]
    assert "Traceback" not in done.stderr, said
