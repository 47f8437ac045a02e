"""Reports: JSON round-trips into the same model; JUnit maps statuses; the table shows fixes."""

from __future__ import annotations

import io
import json
import os
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from typing import Any

import jsonschema
import pytest
from rich.console import Console

from envcheck.core.errors import FatalError
from envcheck.core.result import SCHEMA_VERSION, Status, errored, failed, passed, skipped, warned
from envcheck.core.run_report import RunReport
from envcheck.report.json_report import parse_report, render_json, schema, validate_report
from envcheck.report.junit import render_junit
from envcheck.report.table import print_facts, print_report
from tests.helpers import ROOT, load_report

RESULTS = [
    passed("ok", measured={"x": 1}).named("a.pass", 0.1),
    warned("meh", "do this").named("a.warn", 0.2),
    failed("bad", "fix it", measured={"err": 0.5}, expected={"err": 0.1}).named("a.fail", 0.3),
    skipped("no gpu").named("a.skip", 0.0),
    errored("timed out").named("a.error", 5.0),
]


def test_json_round_trip_keeps_every_field() -> None:
    report = parse_report(render_json(RunReport(RESULTS, facts={"k": {"absent": "why"}})))
    assert report.results == RESULTS
    assert report.facts == {"k": {"absent": "why"}}


@pytest.mark.parametrize(
    "text, needle",
    [
        ("not json", "not valid JSON"),
        ('{"schema_version": 1}', "no 'results'"),
        ('{"schema_version": 99, "results": []}', "schema_version 99"),
        ('{"schema_version": 1, "results": [{"name": "x", "status": "great"}]}', "malformed result"),
    ],
)
def test_parse_rejects_bad_reports(text: str, needle: str) -> None:
    with pytest.raises(FatalError, match=needle.replace("(", r"\(")):
        parse_report(text)


def test_junit_maps_statuses() -> None:
    suite = ET.fromstring(render_junit(RunReport(RESULTS))).find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == (
        "5",
        "1",
        "1",
        "1",
    )
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
    text = (
        "gloo: Connection closed by peer [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] [bold]x"
    )
    buf = io.StringIO()
    console = Console(file=buf, width=400, highlight=False)
    print_report(RunReport(results=[failed(text, "fix [it]").named("dist.all_reduce", 1.0)]), console)
    print_facts({"nccl": {"error": text}}, console)
    assert buf.getvalue().count("[/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] [bold]x") == 2


def test_json_follows_the_published_schema_with_verdict_and_counts() -> None:
    doc = load_report(render_json(RunReport(RESULTS, facts={"k": {"absent": "why"}})))
    assert doc["schema_version"] == 2
    assert doc["verdict"] == "fail" and doc["exit_code"] == 1
    assert doc["counts"] == {"pass": 1, "warn": 1, "fail": 1, "skip": 1, "error": 1}
    assert load_report(render_json(RunReport(RESULTS[:2])))["verdict"] == "warn"
    assert load_report(render_json(RunReport(RESULTS[:1] + RESULTS[3:4])))["verdict"] == "pass"


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.pop("verdict"),
        lambda d: d.update(verdict="meh"),
        lambda d: d["results"][2].update(fault_class="cosmic-ray"),
        lambda d: d["results"][0].update(fault_class="node"),  # a pass has no fault class
        lambda d: d["results"][3].update(reason=None),  # a skip always says why
        lambda d: d["results"][1].pop("fault_class"),
        lambda d: d.update(schema_version=1),
    ],
)
def test_schema_rejects_malformed_reports(mutate: Any) -> None:
    doc = json.loads(render_json(RunReport(RESULTS)))
    mutate(doc)
    with pytest.raises(jsonschema.ValidationError):
        validate_report(doc)


def test_rendering_validates_when_the_tests_ask(monkeypatch: pytest.MonkeyPatch) -> None:
    """conftest sets ENVCHECK_VALIDATE_REPORTS=1, so a report that breaks the schema cannot be rendered."""
    assert os.environ.get("ENVCHECK_VALIDATE_REPORTS") == "1"
    monkeypatch.setattr("envcheck.report.json_report.RESULT_KEYS", ("name", "status"))
    with pytest.raises(jsonschema.ValidationError):
        render_json(RunReport(RESULTS))


def test_schema_ships_in_the_package() -> None:
    assert "report/report_schema.json" in (ROOT / "pyproject.toml").read_text()
    assert schema()["properties"]["schema_version"]["const"] == SCHEMA_VERSION == 2


def test_version_1_reports_still_parse() -> None:
    doc = json.loads(render_json(RunReport(RESULTS)))
    doc["schema_version"] = 1
    del doc["verdict"], doc["counts"]
    assert parse_report(json.dumps(doc)).results == RESULTS


def test_junit_makes_warn_visible_and_has_timestamp_hostname_and_suite_facts() -> None:
    facts = {
        "platform": {"python": "3.12.3", "system": "Linux 6.8"},
        "torch": {"version": "2.13.0+cpu", "cuda_compiled": {"absent": "CPU-only"}},
        "gpu": {
            "driver_version": "580.65.06",
            "driver_cuda": "13.0",
            "gpus": [{"name": "NVIDIA H100"}, {"name": "NVIDIA H100"}],
        },
    }
    when = datetime(2026, 1, 2, 3, 4, 5, 678, tzinfo=timezone.utc)
    root = ET.fromstring(render_junit(RunReport(RESULTS, facts=facts), now=when, hostname="node7"))
    suite = root.find("testsuite")
    assert suite is not None
    assert (suite.get("timestamp"), suite.get("hostname")) == ("2026-01-02T03:04:05", "node7")
    props = {p.get("name"): p.get("value") for p in suite.findall("properties/property")}
    assert props["envcheck.verdict"] == "fail" and props["envcheck.warn"] == "1"
    assert props["torch"] == "2.13.0+cpu" and "torch.cuda" not in props  # absent facts are left out
    assert props["driver"] == "580.65.06" and props["gpus"] == "2: NVIDIA H100, NVIDIA H100"
    warn = suite.find("testcase[@name='a.warn']")
    assert warn is not None
    assert warn.find("properties/property[@name='status']").get("value") == "warn"  # type: ignore[union-attr]
    assert (warn.findtext("system-out") or "").startswith("WARN: meh")
    assert suite.find("testcase[@name='a.pass']/system-out").text == 'ok\nmeasured: {"x": 1}'  # type: ignore[union-attr]
    assert [c.tag for c in suite][0] == "properties"  # the XSD wants properties before the testcases


def test_image_verify_junit_holds_each_images_suite_as_render_junit_writes_it() -> None:
    from envcheck.images.docker_run import ImageRun
    from envcheck.images.verify import aggregate_junit

    runs = [
        ImageRun(image="img:1", report=RunReport(RESULTS), exit_code=1),
        ImageRun(image="img:2", error="container exited 137", exit_code=137),
    ]
    suites = ET.fromstring(aggregate_junit(runs)).findall("testsuite")
    alone = ET.fromstring(render_junit(RunReport(RESULTS), suite_name="img:1")).find("testsuite")
    assert alone is not None and [s.get("name") for s in suites] == ["img:1", "img:2"]

    def shape(suite: ET.Element) -> list[tuple[str, dict[str, str], str]]:
        return [
            (e.tag, {k: v for k, v in e.attrib.items() if k != "timestamp"}, (e.text or "").strip())
            for e in suite.iter()
        ]

    assert shape(suites[0]) == shape(alone)
    assert suites[1].find("testcase/error").get("message") == "container exited 137"  # type: ignore[union-attr]


def test_json_report_serialises_each_result_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from envcheck.core.result import Result

    calls = []
    original = Result.to_dict
    monkeypatch.setattr(Result, "to_dict", lambda self: calls.append(self.name) or original(self))
    doc = json.loads(render_json(RunReport(RESULTS)))
    assert sorted(calls) == sorted(r.name for r in RESULTS)
    assert [r["name"] for r in doc["results"]] == [r.name for r in RESULTS]
