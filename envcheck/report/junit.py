"""JUnit XML: one testcase per check; fail → failure, error → error, skip → skipped."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from envcheck.core.result import Status
from envcheck.core.run_report import RunReport
from envcheck.report.summary import counts


def render_junit(report: RunReport, suite_name: str = "envcheck") -> str:
    """Serialise a report as a JUnit XML document."""
    tally = counts(report.results)
    total_time = sum(r.duration_s for r in report.results)
    suite = ET.Element("testsuite", {
        "name": suite_name,
        "tests": str(len(report.results)),
        "failures": str(tally["fail"]),
        "errors": str(tally["error"]),
        "skipped": str(tally["skip"]),
        "time": f"{total_time:.3f}",
    })
    for r in report.results:
        domain = r.name.partition(".")[0]
        case = ET.SubElement(suite, "testcase", {
            "classname": f"{suite_name}.{domain}", "name": r.name, "time": f"{r.duration_s:.3f}"})
        body = "\n".join(filter(None, [
            r.summary,
            f"remediation: {r.remediation}" if r.remediation else "",
            f"measured: {json.dumps(r.measured, default=str)}" if r.measured else "",
            f"expected: {json.dumps(r.expected, default=str)}" if r.expected else "",
            r.details,
        ]))
        if r.status is Status.FAIL:
            ET.SubElement(case, "failure", {"message": r.summary, "type": "fail"}).text = body
        elif r.status is Status.ERROR:
            ET.SubElement(case, "error", {"message": r.reason or r.summary, "type": "error"}).text = body
        elif r.status is Status.SKIP:
            ET.SubElement(case, "skipped", {"message": r.reason or r.summary})
        else:
            ET.SubElement(case, "system-out").text = body
    suites = ET.Element("testsuites")
    suites.append(suite)
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"
