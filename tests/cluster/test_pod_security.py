"""docs/cluster's workloads meet the restricted Pod Security Standard; the node agent keeps only its named exceptions.

The controls are written from https://kubernetes.io/docs/concepts/security/pod-security-standards/ in
tests/cluster/pod_security.py; test_examples.py validates the same files against the Kubernetes schemas.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cluster.pod_security import pod_spec, violations

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "cluster"
WORKLOADS = ["preflight-init-container.yaml", "job-pod-failure-policy.yaml"]
AGENT = "daemonset-textfile.yaml"


def load(name: str) -> dict[str, Any]:
    (doc,) = [d for d in yaml.safe_load_all((EXAMPLES / name).read_text()) if d]
    return dict(doc)


def named_exceptions(name: str) -> set[str]:
    """The controls a manifest names as its exceptions (`# PSS exception "Control": why`), each with a reason."""
    found = re.findall(r'^# PSS exception "([^"]+)": (\S.*)$', (EXAMPLES / name).read_text(), flags=re.M)
    return {control for control, _reason in found}


@pytest.mark.parametrize("name", WORKLOADS)
def test_workload_meets_the_restricted_standard(name: str) -> None:
    assert violations(load(name)) == {}
    assert named_exceptions(name) == set()


def test_workloads_mount_what_a_read_only_root_leaves_them() -> None:
    for name in WORKLOADS:
        spec = pod_spec(load(name))
        for c in spec["containers"] + spec.get("initContainers", []):
            assert c["securityContext"]["readOnlyRootFilesystem"] is True
            assert {"/tmp", "/home/dev/.cache", "/dev/shm"} <= {m["mountPath"] for m in c["volumeMounts"]}


def test_node_agent_breaks_exactly_its_named_exceptions() -> None:
    found = violations(load(AGENT))
    assert (
        set(found)
        == named_exceptions(AGENT)
        == {"HostPath Volumes", "Volume Types", "Running as Non-root", "Running as Non-root user"}
    )
    assert found["HostPath Volumes"] == ["textfile"]  # one host folder, nothing else of the host


BREAKS = {  # one edit per control: the checker must catch each (the test can fail)
    "Privileged Containers": lambda c, s: c["securityContext"].update(privileged=True),
    "Host Namespaces": lambda c, s: s.update(hostNetwork=True),
    "Capabilities": lambda c, s: c["securityContext"]["capabilities"].update(add=["SYS_ADMIN"]),
    "Capabilities (restricted)": lambda c, s: c["securityContext"]["capabilities"].update(drop=["NET_RAW"]),
    "HostPath Volumes": lambda c, s: s["volumes"].append({"name": "h", "hostPath": {"path": "/"}}),
    "Volume Types": lambda c, s: s["volumes"].append({"name": "n", "nfs": {"server": "x", "path": "/"}}),
    "Host Ports": lambda c, s: c.update(ports=[{"containerPort": 80, "hostPort": 80}]),
    "Seccomp": lambda c, s: c["securityContext"].update(seccompProfile={"type": "Unconfined"}),
    "Seccomp (restricted)": lambda c, s: s["securityContext"].pop("seccompProfile"),
    "Privilege Escalation": lambda c, s: c["securityContext"].pop("allowPrivilegeEscalation"),
    "Running as Non-root": lambda c, s: s["securityContext"].pop("runAsNonRoot"),
    "Running as Non-root user": lambda c, s: c["securityContext"].update(runAsUser=0),
    "/proc Mount Type": lambda c, s: c["securityContext"].update(procMount="Unmasked"),
    "SELinux": lambda c, s: c["securityContext"].update(seLinuxOptions={"type": "spc_t"}),
    "Sysctls": lambda c, s: s["securityContext"].update(sysctls=[{"name": "kernel.msgmax", "value": "1"}]),
}


@pytest.mark.parametrize("control", list(BREAKS))
def test_each_control_catches_its_break(control: str) -> None:
    doc = copy.deepcopy(load("job-pod-failure-policy.yaml"))
    spec = doc["spec"]["template"]["spec"]
    BREAKS[control](spec["containers"][0], spec)
    assert control in violations(doc)
