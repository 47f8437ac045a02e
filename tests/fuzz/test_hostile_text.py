"""Hostile text from outside (environment, interface names, bundles) through every renderer: the table shows it
escaped, JUnit stays well-formed XML 1.0, Prometheus label values parse back to the escaped text, JSON keeps the
exact value; never a UnicodeEncodeError (envcheck.core.text is the one rule)."""

from __future__ import annotations

import io
import json
import re
import xml.etree.ElementTree as ET

from hypothesis import given
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console

from envcheck.cluster.prometheus import render
from envcheck.core.result import failed, passed, warned
from envcheck.core.run_report import RunReport
from envcheck.core.text import BIDI, label_value, visible, xml_attribute, xml_text
from envcheck.report.json_report import render_json
from envcheck.report.junit import render_junit
from envcheck.report.table import print_facts, print_report
from tests.fuzz.strategies import HOSTILE

# What must never reach a terminal: C0 (but newline and tab), DEL, C1, bidi marks, lone surrogates.
RAW = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{BIDI}\ud800-\udfff]")
# XML 1.0 Char (section 2.2): everything else makes the document not well-formed.
NOT_XML = re.compile("[^\x09\x0a\x0d\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def report_with(text: str) -> RunReport:
    results = [
        failed(
            f"NCCL_SOCKET_IFNAME={text} matches nothing",
            f"unset {text}",
            fault_class="config",
            measured={"value": text},
            code="net.ifname",
        ).named("net.ifname", 0.1),
        warned(text, text).named("net.warned", 0.0),
        passed(text, details=text).named("cuda.available", 0.0),
    ]
    return RunReport(
        results=results,
        facts={"env": {"LD_LIBRARY_PATH": text}, "gpu": {"gpus": [{"name": text}]}, text: text},
    )


def terminal(draw: object) -> str:
    out = io.StringIO()
    console = Console(file=out, width=100, color_system=None, highlight=False)
    draw(console)  # type: ignore[operator]
    return out.getvalue()


@given(HOSTILE)
def test_the_table_never_shows_a_raw_control_character(text: str) -> None:
    report = report_with(text)
    shown = terminal(lambda c: print_report(report, c)) + terminal(lambda c: print_facts(report.facts, c))
    assert not RAW.search(shown), repr(shown)
    assert not RAW.search(visible(text))
    shown.encode("utf-8")  # no lone surrogate: an undecodable byte is shown as \\xNN


@given(HOSTILE)
def test_junit_is_well_formed_xml_1_0(text: str) -> None:
    report = report_with(text)
    doc = render_junit(report, hostname=text)
    assert not NOT_XML.search(doc)
    root = ET.fromstring(doc.encode("utf-8"))
    failure = root.find("testsuite/testcase/failure")
    summary = report.results[0].summary
    assert failure is not None and failure.get("message") == xml_attribute(summary)
    assert failure.text is not None and xml_text(summary) in failure.text


@given(HOSTILE)
def test_prometheus_label_values_parse_back_escaped(text: str) -> None:
    results = [failed("x", code=text, fault_class="node").named(text, 0.1)]
    body = render(results, {}, mode="run", exit_code=1, now=1.0).decode("utf-8")
    assert not RAW.search(body.replace("\n", " "))
    checks = {s.labels.get("check") for fam in text_string_to_metric_families(body) for s in fam.samples}
    assert label_value(text) in checks


@given(HOSTILE)
def test_json_keeps_the_exact_value(text: str) -> None:
    doc = json.loads(render_json(report_with(text)))
    assert doc["results"][0]["measured"]["value"] == text
    assert doc["facts"]["env"]["LD_LIBRARY_PATH"] == text
