"""docs/monitoring: the Prometheus alert rules pass `promtool check rules` and their own `promtool test rules` unit
tests (each alert on its fault, the healthy twin on another node silent), a broken rule fails those tests, and the
rules and the Grafana dashboard use exactly the metric names envcheck writes. The same files in a real Prometheus
scraping a real node_exporter: tests/images/test_monitoring_stack.py."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cluster.monitoring import MONITORING, referenced_metrics, require, written_metric_names

RULES = MONITORING / "envcheck-alerts.yaml"
DASHBOARD = MONITORING / "envcheck-dashboard.json"
ASKED = {
    "EnvcheckNodeFault",
    "EnvcheckImageFault",
    "EnvcheckMetricsStale",
    "EnvcheckOwnFailure",
    "EnvcheckUsageError",
}


def promtool(*args: str, cwd: Path = MONITORING) -> subprocess.CompletedProcess[str]:
    return subprocess.run([require("promtool"), *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def rules() -> list[dict[str, Any]]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def test_the_rules_are_valid_and_pass_their_unit_tests() -> None:
    checked = promtool("check", "rules", RULES.name)
    assert checked.returncode == 0 and f"SUCCESS: {len(rules())} rules found" in checked.stdout, (
        checked.stdout
    )
    tested = promtool("test", "rules", "envcheck-alerts-test.yaml")
    assert tested.returncode == 0 and "SUCCESS" in tested.stdout, tested.stdout + tested.stderr


def test_every_alert_the_issue_asks_for_is_there_and_unit_tested() -> None:
    assert {r["alert"] for r in rules()} == ASKED
    tests = yaml.safe_load((MONITORING / "envcheck-alerts-test.yaml").read_text())["tests"]
    fired = {a["alertname"] for t in tests for a in t["alert_rule_test"] if a["exp_alerts"]}
    silent = {a["alertname"] for t in tests for a in t["alert_rule_test"] if not a["exp_alerts"]}
    assert fired == ASKED
    assert {
        "EnvcheckImageFault",
        "EnvcheckMetricsStale",
        "EnvcheckOwnFailure",
    } <= silent  # their `for`/threshold


@pytest.mark.parametrize(
    "break_it, alert",
    [
        # without the status join a node-class *warning* (gpu08) would page as a node fault
        (
            (
                '\n            and on (instance, check) (envcheck_check_status{status="fail"} == 1)\n        labels:\n'
                "          severity: critical",
                "\n        labels:\n          severity: critical",
            ),
            "EnvcheckNodeFault",
        ),
        (
            ("> 4200", "> 420"),
            "EnvcheckMetricsStale",
        ),  # stale after 7 minutes: a healthy 30-minute node alerts
        (
            (
                "\n            unless on (instance, job) (max by (instance, job) (envcheck_usage_error) == 1)",
                "",
            ),
            "EnvcheckOwnFailure",
        ),  # a usage error would page twice
    ],
)
def test_a_broken_rule_fails_its_unit_test(tmp_path: Path, break_it: tuple[str, str], alert: str) -> None:
    text = RULES.read_text()
    assert break_it[0] in text, "the rule this test breaks has changed: update the test"
    (tmp_path / RULES.name).write_text(text.replace(break_it[0], break_it[1], 1))
    shutil.copy(MONITORING / "envcheck-alerts-test.yaml", tmp_path)
    tested = promtool("test", "rules", "envcheck-alerts-test.yaml", cwd=tmp_path)
    assert tested.returncode != 0 and f"alertname: {alert}" in tested.stdout + tested.stderr, tested.stdout


def test_the_rules_use_only_metrics_envcheck_writes() -> None:
    written = written_metric_names()
    used = set().union(*(referenced_metrics(r["expr"]) for r in rules()))
    assert used and used <= written, used - written


def _exprs(dashboard: dict[str, Any]) -> list[str]:
    return [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]


def test_the_dashboard_loads_and_shows_every_metric_envcheck_writes() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "envcheck" and dashboard["schemaVersion"] >= 36
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["query"] == "prometheus"
    assert referenced_metrics(variables["instance"]["definition"]) <= written_metric_names()
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}" and panel["targets"], panel["title"]
        g = panel["gridPos"]
        assert g["x"] + g["w"] <= 24, panel["title"]
        for target in panel["targets"]:
            assert '{instance=~"$instance"' in target["expr"], (panel["title"], target["expr"])
    used = set().union(*(referenced_metrics(e) for e in _exprs(dashboard)))
    written = written_metric_names()
    assert used <= written, used - written  # no panel on a metric envcheck does not write
    assert written - used == set(), written - used  # and no metric envcheck writes without a panel
