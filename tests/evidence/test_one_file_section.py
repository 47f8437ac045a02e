"""Adding a replayable check takes one file: the bundle captures it, validates it and `explain` replays it with no
change anywhere else (the registry's SECTIONS is the only list, patched here as the registry line would be)."""

from __future__ import annotations

import pytest

from envcheck.checks.check_registry import SECTIONS
from envcheck.core.check import Context
from envcheck.core.errors import UsageError
from envcheck.core.result import Status
from envcheck.evidence import bundle as evidence
from envcheck.evidence.replay import explain_bundle
from tests.evidence import one_file_section


@pytest.fixture
def with_section(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("envcheck.checks.check_registry.SECTIONS", (*SECTIONS, one_file_section.SECTION))


def test_a_section_in_one_module_is_captured_validated_and_replayed(with_section: None) -> None:
    host = evidence.capture_host()
    assert set(host["host_load"]) == {"load1", "cpus"}
    doc = evidence.validate_bundle(evidence.make_bundle(host, {}, "test"))
    replayed = {r.name: r for r in explain_bundle(doc, Context(allow_cpu=True))}
    live = one_file_section.SECTION.judge(Context())
    assert replayed["host.load"].status is live.status
    busy = {**doc, "host_load": {"load1": 1000.0, "cpus": 2}}
    (found,) = [r for r in explain_bundle(busy, Context(allow_cpu=True)) if r.name == "host.load"]
    assert found.status is Status.WARN and found.code == "host.overloaded" and found.fault_class == "node"


def test_its_shape_check_guards_explain(with_section: None) -> None:
    doc = evidence.make_bundle(evidence.capture_host(), {}, "test")
    with pytest.raises(UsageError, match=r"bundle's host_load.load1 must be float or int"):
        evidence.validate_bundle({**doc, "host_load": {"load1": "high"}})
