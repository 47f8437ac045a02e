"""Healthy shared nodes stay in service, broken ones do not (issue 31): every deployment context of
tests/staging/contexts.py, and its broken twin, on a staged 8-GPU node, through `envcheck run` as the documented
deployments run it (prolog and health on the host; a pod's or a job's preflight inside its allocation).

Staged (see tests/staging/gpu_node.py): the PCI tree, /dev/nvidia*, /proc/driver/nvidia, /dev/kmsg, libcuda and NVML.
Real: the mount namespace, the kernel's checks on the device nodes (a cgroup-v1 device controller for Slurm's
ConstrainDevices), envcheck's processes, its budgets and kills, the exit codes.
"""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from tests.staging.contexts import CASES, Case
from tests.staging.gpu_node import staged_node


def _verdict(done: subprocess.CompletedProcess[str], results: dict[str, Any]) -> str:
    lines = [f"{name}: {r['status']} {r.get('code')} {r['summary'][:160]}" for name, r in results.items()
             if name != "_report"]
    return f"exit {done.returncode}\n" + "\n".join(lines) + f"\nstderr: {done.stderr[-1500:]}"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_each_context_gets_its_verdict(case: Case, tmp_path_factory: pytest.TempPathFactory) -> None:
    folder = tmp_path_factory.mktemp("node")
    with staged_node(case.node, folder) as node:
        for _ in range(case.runs):
            done, results = node.envcheck(*case.args)
    said = _verdict(done, results)
    assert done.returncode == case.exit_code, said
    for check, code in case.codes.items():
        assert results[check].get("code") == code, said
    for check, status in case.statuses.items():
        assert results[check]["status"] == status, said
    assert "Traceback" not in done.stderr, said
    report = results["_report"]
    if case.args[:2] in (("--for", "prolog"), ("--for", "health")):
        assert report["facts"]["envcheck"]["torch_imported"] is False, said  # the torch-free node path


def test_every_broken_twin_names_a_healthy_context() -> None:
    names = {c.name for c in CASES}
    assert all(c.twin_of in names for c in CASES if c.twin_of)
    assert any(c.exit_code == 0 for c in CASES) and any(c.exit_code != 0 for c in CASES)
