"""JUnit XML: one testcase per check; fail → failure, error → error, skip → skipped.

JUnit has no "warning" outcome. A WARN check stays a passing testcase (so CI does not go red), and is made
visible three ways (docs/reports.md): every testcase has a `status` property (pass/warn/...), a WARN's
system-out starts with "WARN: ", and the suite's properties carry `envcheck.warn` (the count) and
`envcheck.verdict` (pass/warn/fail), next to the key facts. The suite has `timestamp` and `hostname`.

Text from outside (summaries quoting the environment, facts) may hold characters XML 1.0 forbids (ESC, NUL,
undecodable bytes); every attribute and text of the suite passes through envcheck.core.text.xml_text, which
shows them as escapes (`\x1b`), so the file is always well-formed and says what the value held.
"""

from __future__ import annotations

import json
import socket
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from typing import Any

from envcheck import __version__
from envcheck.core.result import Status
from envcheck.core.run_report import RunReport
from envcheck.core.text import xml_attribute, xml_text
from envcheck.report.summary import counts, verdict


def _fact(facts: dict[str, Any], *path: str) -> str | None:
    """A scalar fact as text, or None when it is absent or not a scalar."""
    value: Any = facts
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return str(value) if isinstance(value, (str, int, float, bool)) else None


def suite_properties(report: RunReport) -> dict[str, str]:
    """The key facts a CI reader wants on the suite: versions, GPUs, the verdict and the warning count."""
    facts = report.facts
    gpus = facts.get("gpu", {}).get("gpus") if isinstance(facts.get("gpu"), dict) else None
    names = (
        [str(g.get("name")) for g in gpus if isinstance(g, dict) and g.get("name")]
        if isinstance(gpus, list)
        else []
    )
    props = {
        "envcheck.version": __version__,
        "envcheck.verdict": verdict(report.results),
        "envcheck.warn": str(counts(report.results)["warn"]),
        "envcheck.level": report.context.level.value,
        "python": _fact(facts, "platform", "python"),
        "system": _fact(facts, "platform", "system"),
        "distribution": _fact(facts, "platform", "distribution"),
        "torch": _fact(facts, "torch", "version"),
        "torch.cuda": _fact(facts, "torch", "cuda_compiled"),
        "cudnn": _fact(facts, "torch", "cudnn_loaded"),
        "nccl": _fact(facts, "torch", "nccl_loaded"),
        "driver": _fact(facts, "gpu", "driver_version"),
        "driver.cuda": _fact(facts, "gpu", "driver_cuda"),
        "gpus": f"{len(names)}: {', '.join(names)}" if names else None,
    }
    return {k: v for k, v in props.items() if v is not None}


def render_junit(
    report: RunReport, suite_name: str = "envcheck", now: datetime | None = None, hostname: str | None = None
) -> str:
    """Serialise a report as a JUnit XML document (`now` and `hostname` default to this moment and host)."""
    suites = ET.Element("testsuites")
    suites.append(junit_suite(report, suite_name, now, hostname))
    xml_safe(suites)
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def junit_suite(
    report: RunReport, suite_name: str = "envcheck", now: datetime | None = None, hostname: str | None = None
) -> ET.Element:
    """The report's <testsuite> element (`render_junit` wraps it; `image verify` gathers one per image)."""
    tally = counts(report.results)
    total_time = sum(r.duration_s for r in report.results)
    stamp = (now or datetime.now(timezone.utc)).astimezone(timezone.utc).replace(tzinfo=None, microsecond=0)
    suite = ET.Element(
        "testsuite",
        {
            "name": suite_name,
            "tests": str(len(report.results)),
            "failures": str(tally["fail"]),
            "errors": str(tally["error"]),
            "skipped": str(tally["skip"]),
            "time": f"{total_time:.3f}",
            "timestamp": stamp.isoformat(),  # JUnit's XSD: ISO 8601 without a zone; ours is UTC
            "hostname": hostname or socket.gethostname() or "localhost",
        },
    )
    suite_props = ET.SubElement(suite, "properties")
    for name, value in suite_properties(report).items():
        ET.SubElement(suite_props, "property", {"name": name, "value": value})
    for r in report.results:
        domain = r.name.partition(".")[0]
        case = ET.SubElement(
            suite,
            "testcase",
            {"classname": f"{suite_name}.{domain}", "name": r.name, "time": f"{r.duration_s:.3f}"},
        )
        body = "\n".join(
            filter(
                None,
                [
                    r.summary,
                    f"fault class: {r.fault_class}" if r.fault_class else "",
                    f"code: {r.code}" if r.code else "",
                    f"remediation: {r.remediation}" if r.remediation else "",
                    f"measured: {json.dumps(r.measured, default=str)}" if r.measured else "",
                    f"expected: {json.dumps(r.expected, default=str)}" if r.expected else "",
                    r.details,
                ],
            )
        )
        props = ET.SubElement(case, "properties")
        ET.SubElement(props, "property", {"name": "status", "value": r.status.value})
        if r.fault_class:  # who must act: node, image or config (the cluster exit policy reads it)
            ET.SubElement(props, "property", {"name": "fault_class", "value": r.fault_class.value})
        if r.code:  # the finding's stable code (what CI and cluster policy switch on)
            ET.SubElement(props, "property", {"name": "code", "value": r.code})
        if r.status is Status.FAIL:
            ET.SubElement(case, "failure", {"message": r.summary, "type": "fail"}).text = body
        elif r.status is Status.ERROR:
            ET.SubElement(case, "error", {"message": r.reason or r.summary, "type": "error"}).text = body
        elif r.status is Status.SKIP:
            ET.SubElement(case, "skipped", {"message": r.reason or r.summary})
        elif r.status is Status.WARN:
            ET.SubElement(case, "system-out").text = f"WARN: {body}"
        else:
            ET.SubElement(case, "system-out").text = body
    return xml_safe(suite)


def xml_safe(element: ET.Element) -> ET.Element:
    """Make every text, tail and attribute of `element` and its children XML 1.0 characters only (in place)."""
    for node in element.iter():
        node.tag = xml_text(node.tag)
        if node.text is not None:
            node.text = xml_text(node.text)
        if node.tail is not None:
            node.tail = xml_text(node.tail)
        node.attrib = {xml_text(k): xml_attribute(v) for k, v in node.attrib.items()}
    return element
