"""The monitoring stack, for real: the DaemonSet of docs/cluster/daemonset-textfile.yaml runs its loop as written in the
built image (its securityContext as docker run flags, its hostPath a host folder owned by root 0755 as kubelet's
DirectoryOrCreate makes it), Debian's prometheus-node-exporter reads the textfile with its textfile collector, and
Debian's prometheus scrapes it, evaluating docs/monitoring/envcheck-alerts.yaml; every query of the Grafana dashboard
(docs/monitoring/envcheck-dashboard.json) runs against it.

Three nodes, three node_exporters: the DaemonSet's container, which no NVIDIA runtime gives a GPU here (as where the
runtime ignores NVIDIA_VISIBLE_DEVICES: envcheck cannot judge the node from it, says so as its container's
configuration and claims no node fault), a healthy staged node, and a node whose fault is staged (the torch-free npd
run with a stand-in libcuda.so.1 whose cuInit answers 802, in a private mount namespace with the device nodes:
tests/cluster/documented.py). Only the faulty node gets the node-fault alert, only the DaemonSet's the "could not
judge" one, the healthy node none. Then the DaemonSet with a mistyped flag: its loop exits with the usage error, and
the alert for it fires.

Real: Docker, the image, envcheck, node_exporter, Prometheus (loopback, free ports, data in a temp dir, stopped by
PID), its rule evaluation and query API. Staged: the GPU layer of the faulty node; `runtimeClassName: nvidia` (no
NVIDIA runtime here).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker.errors
import pytest

from tests.cluster.documented import ROOT, TEXTFILE_DIR, fill, manifest, staged_node
from tests.cluster.monitoring import MONITORING, Stack, stack, wait_for
from tests.images.k8s_run import command, container, docker_kwargs, pod_spec
from tests.staging.libcuda import build

pytestmark = [pytest.mark.docker, pytest.mark.slow]
PROM = "envcheck.prom"


def start_daemonset(client: Any, image: str, textfile: Path, typo: tuple[str, str] | None = None) -> Any:
    """The DaemonSet's container, detached, as its manifest sets it (the loop then sleeps its 30 minutes)."""
    (ds,) = manifest("daemonset-textfile.yaml")
    spec = pod_spec(ds)
    c = container(spec, "envcheck")
    argv = command(c)
    if typo is not None:
        argv = [*argv[:-1], fill(argv[-1], dict([typo]))]
    kwargs = docker_kwargs(spec, c, host_paths={TEXTFILE_DIR: textfile})
    assert kwargs["user"] == "0:0" and kwargs["read_only"] and kwargs["cap_drop"] == ["ALL"]
    return client.containers.run(image, argv, detach=True, **kwargs)


@pytest.fixture(scope="module")
def nodes(
    tmp_path_factory: pytest.TempPathFactory, docker_client: Any, runtime_image: str
) -> Iterator[dict[str, Any]]:
    base = tmp_path_factory.mktemp("monitoring")
    base.chmod(0o755)
    daemonset, healthy, faulty = base / "daemonset-node", base / "healthy-node", base / "faulty-node"
    for folder in (daemonset, healthy, faulty):
        folder.mkdir(mode=0o755)  # root-owned 0755, as kubelet's DirectoryOrCreate
    ds = start_daemonset(docker_client, runtime_image, daemonset)
    try:
        wait_for(lambda: (daemonset / PROM).exists(), 120, "the DaemonSet's textfile")
        libdir = build(base)
        for folder, stub, code in ((healthy, {}, 0), (faulty, {"STUB_INIT": "802"}, 1)):
            done = subprocess.run(
                [
                    "/bin/sh",
                    "-c",
                    f"{staged_node(base, libdir, **stub)} {sys.executable} -m envcheck run --for npd --prometheus "
                    f"{folder / PROM} --timeout 600",
                ],
                capture_output=True,
                text=True,
                timeout=120,
                cwd=ROOT,
                env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
            )
            assert done.returncode == code, done.stdout + done.stderr
        assert done.stdout.startswith("[node] "), done.stdout + done.stderr
        dirs = {"daemonset": daemonset, "healthy": healthy, "faulty": faulty}
        with stack(base, dirs) as s:
            wait_for(lambda: len(s.query("envcheck_build_info")) == 3, 60, "the three textfiles scraped")
            yield {
                "stack": s,
                "daemonset": ds,
                "dirs": dirs,
                "client": docker_client,
                "image": runtime_image,
            }
    finally:
        with contextlib.suppress(docker.errors.NotFound):  # the usage-error test replaces the pod
            ds.remove(force=True)


def test_the_daemonset_loop_writes_its_textfile_and_keeps_running(nodes: dict[str, Any]) -> None:
    ds = nodes["daemonset"]
    ds.reload()
    assert ds.status == "running"  # sleeping its 30 minutes, not exited
    logs = ds.logs().decode(errors="replace")
    assert "Traceback" not in logs and "usage error" not in logs, logs
    # npd's verdict (table: stderr): "unknown", with the container's configuration named, not the node's fault
    assert ds.logs(stderr=False).decode().splitlines()[0] == "envcheck: could not judge the node", logs
    assert "[config] node.cuda_driver: this container was given no GPU" in logs, logs
    text = (nodes["dirs"]["daemonset"] / PROM).read_text()
    assert 'envcheck_exit_code{mode="npd"} 2.0' in text and "envcheck_node_fault 0.0" in text, text
    assert 'envcheck_usage_error{mode="npd"} 0.0' in text, text
    assert (
        'envcheck_finding{check="node.cuda_driver",code="cuda.container",fault_class="config"} 1.0' in text
    ), text


def test_node_exporter_and_prometheus_carry_the_series(nodes: dict[str, Any]) -> None:
    s: Stack = nodes["stack"]
    daemonset, healthy, faulty = s.instance("daemonset"), s.instance("healthy"), s.instance("faulty")
    for node in (daemonset, healthy, faulty):
        assert s.value("node_textfile_scrape_error", node) == 0, node
        assert s.value('envcheck_usage_error{mode="npd"}', node) == 0, node
        assert 0 <= time.time() - (s.value("envcheck_last_run_timestamp_seconds", node) or 0) < 600, node
    assert [s.value("envcheck_node_fault", n) for n in (daemonset, healthy, faulty)] == [0, 0, 1]
    assert [s.value('envcheck_exit_code{mode="npd"}', n) for n in (daemonset, healthy, faulty)] == [2, 0, 1]
    node_faults = s.query('envcheck_check_fault{fault_class="node"} == 1')
    assert {r["metric"]["instance"] for r in node_faults} == {faulty}
    given_no_gpu = s.query('envcheck_finding{code="cuda.container",fault_class="config"} == 1')
    assert {r["metric"]["instance"] for r in given_no_gpu} == {daemonset}  # the DaemonSet's own deployment
    could_not_judge = s.query(
        'envcheck_exit_code{mode="npd"} == 2 unless envcheck_usage_error == 1'
    )  # the docs'
    assert {r["metric"]["instance"] for r in could_not_judge} == {daemonset}


def test_the_alert_rules_load_and_fire_only_for_the_faulty_node(nodes: dict[str, Any]) -> None:
    s: Stack = nodes["stack"]
    wait_for(lambda: s.alerts("EnvcheckNodeFault"), 30, "EnvcheckNodeFault")
    rules = s.rules()
    assert {r["name"] for r in rules} == {
        "EnvcheckNodeFault",
        "EnvcheckImageFault",
        "EnvcheckMetricsStale",
        "EnvcheckOwnFailure",
        "EnvcheckUsageError",
    }
    assert all(r["health"] == "ok" for r in rules), [(r["name"], r.get("lastError")) for r in rules]
    (alert,) = s.alerts("EnvcheckNodeFault")
    assert alert["labels"]["instance"] == s.instance("faulty") and alert["state"] == "firing"
    assert alert["labels"]["check"] == "node.cuda_driver" and alert["labels"]["code"].startswith("cuda.")
    # the DaemonSet's container, given no GPU, could not judge its node: pending for the rule's `for: 1h`
    wait_for(lambda: s.alerts("EnvcheckOwnFailure"), 30, "EnvcheckOwnFailure")
    (own,) = s.alerts("EnvcheckOwnFailure")
    assert own["labels"]["instance"] == s.instance("daemonset") and own["state"] == "pending", own
    for quiet in ("EnvcheckImageFault", "EnvcheckMetricsStale", "EnvcheckUsageError"):
        assert s.alerts(quiet) == [], quiet


def test_every_dashboard_query_runs_on_the_real_series(nodes: dict[str, Any]) -> None:
    s: Stack = nodes["stack"]
    dashboard = json.loads((MONITORING / "envcheck-dashboard.json").read_text())
    (variable,) = [v for v in dashboard["templating"]["list"] if v["name"] == "instance"]
    nodes_found = s.query(
        "group by (instance) (envcheck_build_info)"
    )  # label_values(envcheck_build_info, instance)
    assert len(nodes_found) == 3 and "envcheck_build_info" in variable["definition"]
    empty = []
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            rows = s.query(
                target["expr"].replace("$instance", variable["allValue"])
            )  # raises on a PromQL error
            if not rows:
                empty.append(panel["title"])
    # what these nodes cannot have: no run here measures busbw or matmul TFLOP/s; every other panel shows their data
    # (the node path's GPU count too: node.cuda_driver's; the config findings: the DaemonSet's container's)
    assert set(empty) <= {"All-reduce bus bandwidth (dist.busbw)", "Matmul TFLOP/s"}, empty
    (faults,) = [p for p in dashboard["panels"] if p["title"] == "Nodes with a node fault"]
    assert s.query(faults["targets"][0]["expr"].replace("$instance", ".*"))[0]["value"][1] == "1"


def test_a_mistyped_daemonset_ends_its_pod_and_fires_the_usage_alert(nodes: dict[str, Any]) -> None:
    s: Stack = nodes["stack"]
    folder = nodes["dirs"]["daemonset"]
    nodes["daemonset"].remove(force=True)  # the rollout replaces the pod
    bad = start_daemonset(nodes["client"], nodes["image"], folder, typo=("--timeout 600", "--timeout 10m"))
    try:
        status = bad.wait(timeout=120)
        logs = bad.logs().decode(errors="replace")
    finally:
        bad.remove(force=True)
    assert status["StatusCode"] == 2, (
        logs
    )  # kubelet restarts it: CrashLoopBackOff, visible in `kubectl get pods`
    assert "a usage error in the npd command" in logs and "fix the DaemonSet" in logs, logs
    wait_for(lambda: s.alerts("EnvcheckUsageError"), 30, "EnvcheckUsageError")
    (alert,) = s.alerts("EnvcheckUsageError")
    assert alert["labels"]["instance"] == s.instance("daemonset") and alert["labels"]["mode"] == "npd"
    assert s.value("envcheck_node_fault", s.instance("daemonset")) is None  # nothing judged, nothing claimed


def test_the_docs_promql_examples_run_and_find_the_faulty_node(nodes: dict[str, Any]) -> None:
    """docs/cluster.md's "Reading them" queries, as written, against the real series."""
    import re

    s: Stack = nodes["stack"]
    text = (ROOT / "docs" / "cluster.md").read_text()
    (block,) = re.findall(r"```promql\n(.*?)```", text, flags=re.S)
    queries = [line.split("#")[0].strip() for line in block.splitlines() if line.split("#")[0].strip()]
    assert len(queries) >= 5
    answers = {q: s.query(q) for q in queries}  # each must parse and run
    (faulty,) = answers["envcheck_node_fault == 1"]
    assert faulty["metric"]["instance"] == s.instance("faulty")

    def where(query: str) -> set[str]:
        (asked,) = [q for q in queries if q.startswith(query)]
        return {r["metric"]["instance"] for r in answers[asked]}

    assert where('envcheck_check_status{status="fail"}') == {faulty["metric"]["instance"]}
    # the DaemonSet's pod now ends in a usage error (the test before this one): its exit 2 is not "could not judge"
    assert s.value('envcheck_exit_code{mode="npd"}', s.instance("daemonset")) == 2
    assert where('envcheck_exit_code{mode="npd"} == 2') == set()
