"""Reports: JSON round-trips into the same model; JUnit maps statuses; the table shows fixes."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET

import pytest
from rich.console import Console

from envcheck.core.result import Status, errored, failed, passed, skipped, warned
from envcheck.core.run_report import RunReport
from envcheck.errors import FatalError
from envcheck.report.json_report import parse_report, render_json
from envcheck.report.junit import render_junit
from envcheck.report.table import print_facts, print_report

RESULTS = [passed("ok", measured={"x": 1}).named("a.pass", 0.1),
           warned("meh", "do this").named("a.warn", 0.2),
           failed("bad", "fix it", measured={"err": 0.5}, expected={"err": 0.1}).named("a.fail", 0.3),
           skipped("no gpu").named("a.skip", 0.0),
           errored("timed out").named("a.error", 5.0)]


def test_json_round_trip_keeps_every_field() -> None:
    report = parse_report(render_json(RunReport(RESULTS, facts={"k": {"absent": "why"}})))
    assert report.results == RESULTS
    assert report.facts == {"k": {"absent": "why"}}


@pytest.mark.parametrize("text, needle", [
    ("not json", "not valid JSON"),
    ('{"schema_version": 1}', "no 'results'"),
    ('{"schema_version": 99, "results": []}', "schema_version 99"),
    ('{"schema_version": 1, "results": [{"name": "x", "status": "great"}]}', "malformed result"),
])
def test_parse_rejects_bad_reports(text: str, needle: str) -> None:
    with pytest.raises(FatalError, match=needle.replace("(", r"\(")):
        parse_report(text)


def test_junit_maps_statuses() -> None:
    suite = ET.fromstring(render_junit(RunReport(RESULTS))).find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == (
        "5", "1", "1", "1")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert cases["a.fail"].find("failure") is not None
    assert "fix it" in (cases["a.fail"].findtext("failure") or "")
    assert cases["a.error"].find("error") is not None
    assert cases["a.skip"].find("skipped") is not None
    assert cases["a.pass"].find("failure") is None


def test_table_shows_remediation_under_problem_rows() -> None:
    buf = io.StringIO()
    print_report(RunReport(RESULTS), Console(file=buf, width=200))
    text = buf.getvalue()
    assert "fix: fix it" in text and "fix: do this" in text
    assert "FAILED: 1 pass, 1 warn, 1 fail, 1 skip, 1 error" in text


def test_skip_and_error_always_carry_a_reason() -> None:
    for r in RESULTS:
        if r.status in (Status.SKIP, Status.ERROR):
            assert r.reason


def test_table_prints_error_text_with_brackets_literally() -> None:
    """Real gloo error text contains '[/path/pair.cc:553]', which rich would parse as a closing tag."""
    text = "gloo: Connection closed by peer [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] [bold]x"
    buf = io.StringIO()
    console = Console(file=buf, width=400, highlight=False)
    print_report(RunReport(results=[failed(text, "fix [it]").named("dist.all_reduce", 1.0)]), console)
    print_facts({"nccl": {"error": text}}, console)
    assert buf.getvalue().count("[/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] [bold]x") == 2
