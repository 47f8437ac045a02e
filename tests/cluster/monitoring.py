"""The real monitoring stack for the tests: Debian's prometheus-node-exporter (textfile collector) and prometheus,
each on a free loopback port, data in a temp dir, stopped by PID; and the metric names envcheck writes, from its own
renderer, to hold docs/monitoring's rules and dashboard to.

Missing binaries are a visible skip (apt-get install prometheus prometheus-node-exporter, as .ci/run does);
ENVCHECK_REQUIRE_MONITORING=1 (CI) makes that a failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "docs" / "monitoring"
SEARCH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/bin"])
NODE_EXPORTER = ("prometheus-node-exporter", "node_exporter")


def find(*names: str) -> str | None:
    """The first of `names` on PATH."""
    return next((p for p in (shutil.which(n, path=SEARCH) for n in names) if p), None)


def require(*names: str) -> str:
    """The binary's path; a visible skip (a failure with ENVCHECK_REQUIRE_MONITORING=1) when it is missing."""
    path = find(*names)
    if path is None:
        why = f"{names[0]} not found: apt-get install prometheus prometheus-node-exporter (or run .ci/run)"
        if os.environ.get("ENVCHECK_REQUIRE_MONITORING") == "1":
            pytest.fail(f"monitoring test cannot run and ENVCHECK_REQUIRE_MONITORING=1: {why}")
        pytest.skip(why)
    return path


def written_metric_names() -> set[str]:
    """Every metric family envcheck's textfile can carry: a run with every figure and fault class, and a usage error."""
    from prometheus_client.parser import text_string_to_metric_families

    from envcheck.cluster.prometheus import render, render_usage_error
    from envcheck.core.result import FaultClass, Result, Status

    results = [
        Result(
            Status.FAIL,
            "x",
            name="dist.busbw",
            fault_class=FaultClass.NODE,
            code="dist.slow",
            measured={"peak_busbw_gbps": 1.0, "matmul_tflops": 2.0},
        ),
        Result(Status.PASS, "x", name="cuda.devices", measured={"gpus": 8}),
        Result(Status.ERROR, "x", name="gpu.health", reason="timed out"),
    ]
    texts = [render(results, {}, mode="npd", exit_code=1).decode(), render_usage_error("npd", 2).decode()]
    return {fam.name for text in texts for fam in text_string_to_metric_families(text)}


def referenced_metrics(expr: str) -> set[str]:
    """The envcheck_* metric names a PromQL expression uses."""
    return set(re.findall(r"\benvcheck_[a-z_]+", expr))


def http_json(url: str, timeout: float = 5) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


def wait_for(predicate: Any, timeout: float, what: str, log: Path | None = None) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):
            last = predicate()
            if last:
                return last
        time.sleep(0.2)
    tail = log.read_text()[-3000:] if log and log.exists() else ""
    raise AssertionError(f"{what} not within {timeout:g}s (last: {last!r})\n{tail}")


@dataclass
class Stack:
    """node_exporter(s) reading textfile folders, and one Prometheus scraping them with envcheck's rules."""

    dir: Path
    exporters: dict[str, int] = field(default_factory=dict)  # textfile folder name -> port
    prometheus_port: int = 0
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def query(self, promql: str) -> list[dict[str, Any]]:
        """An instant query's result vector (raises on a PromQL error: the API says status error)."""
        url = f"http://127.0.0.1:{self.prometheus_port}/api/v1/query?" + urllib.parse.urlencode(
            {"query": promql}
        )
        answer = http_json(url)
        assert answer["status"] == "success", answer
        return list(answer["data"]["result"])

    def value(self, promql: str, instance: str) -> float | None:
        for row in self.query(promql):
            if row["metric"].get("instance") == instance:
                return float(row["value"][1])
        return None

    def instance(self, name: str) -> str:
        return f"127.0.0.1:{self.exporters[name]}"

    def rules(self) -> list[dict[str, Any]]:
        answer = http_json(f"http://127.0.0.1:{self.prometheus_port}/api/v1/rules")
        return [r for g in answer["data"]["groups"] for r in g["rules"]]

    def alerts(self, name: str) -> list[dict[str, Any]]:
        return [a for r in self.rules() if r["name"] == name for a in r.get("alerts", [])]


def _start(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    out = log.open("ab")
    try:
        return subprocess.Popen(argv, stdout=out, stderr=out, start_new_session=True)
    finally:
        out.close()


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM each by PID, then SIGKILL what did not exit."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


@contextlib.contextmanager
def stack(
    folder: Path, textfile_dirs: dict[str, Path], rules: Path = MONITORING / "envcheck-alerts.yaml"
) -> Iterator[Stack]:
    """Start one node_exporter per textfile folder (a node each) and a Prometheus scraping them every second and
    evaluating `rules` every second; everything is stopped and nothing of it stays running when the block ends."""
    exporter, prometheus = require(*NODE_EXPORTER), require("prometheus")
    s = Stack(folder)
    try:
        for name, textfile in textfile_dirs.items():
            port = free_port()
            s.exporters[name] = port
            s.procs.append(
                _start(
                    [
                        exporter,
                        f"--web.listen-address=127.0.0.1:{port}",
                        "--collector.disable-defaults",
                        "--collector.textfile",
                        f"--collector.textfile.directory={textfile}",
                    ],
                    folder / f"node_exporter-{name}.log",
                )
            )
        for name, port in s.exporters.items():
            wait_for(
                lambda p=port: (
                    b"node_textfile_scrape_error"
                    in urllib.request.urlopen(f"http://127.0.0.1:{p}/metrics", timeout=2).read()
                ),
                30,
                f"node_exporter {name}",
                folder / f"node_exporter-{name}.log",
            )
        s.prometheus_port = free_port()
        targets = json.dumps([f"127.0.0.1:{p}" for p in s.exporters.values()])
        (folder / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            f"rule_files:\n  - {rules}\n"
            f"scrape_configs:\n  - job_name: node\n    static_configs:\n      - targets: {targets}\n"
        )
        s.procs.append(
            _start(
                [
                    prometheus,
                    f"--config.file={folder / 'prometheus.yml'}",
                    f"--storage.tsdb.path={folder / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{s.prometheus_port}",
                ],
                folder / "prometheus.log",
            )
        )
        wait_for(
            lambda: http_json(f"http://127.0.0.1:{s.prometheus_port}/api/v1/status/config"),
            60,
            "prometheus",
            folder / "prometheus.log",
        )
        yield s
    finally:
        stop(s.procs)
        left = [p.pid for p in s.procs if p.poll() is None]
        assert not left, f"monitoring processes left running: {left}"
