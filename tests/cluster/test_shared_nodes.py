"""Healthy shared nodes stay in service, broken ones do not: every deployment context of
tests/staging/contexts.py, and its broken twin, on a staged 8-GPU node, through `envcheck run` as the documented
deployments run it (prolog and health on the host; a pod's or a job's preflight inside its allocation).

Staged (see tests/staging/gpu_node.py): the PCI tree, /dev/nvidia*, /proc/driver/nvidia, /dev/kmsg, libcuda and NVML.
Real: the mount namespace, the kernel's checks on the device nodes (a cgroup-v1 device controller for Slurm's
ConstrainDevices), envcheck's processes, its budgets and kills, the exit codes.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.checks.dcgm.health_documents import HEALTHY_263
from tests.staging import dcgmi
from tests.staging.contexts import BOOT, CASES, HOST, JOB, Case
from tests.staging.gpu_node import Node, eight_gpus, staged_node

# long: 79 staged nodes, each a real envcheck process, keep a core busy for about two minutes (the parallel phase's
# largest module, which loadscope gives to one worker); `make test` runs it in its `long` stream
pytestmark = pytest.mark.long


def _verdict(done: subprocess.CompletedProcess[str], results: dict[str, Any]) -> str:
    lines = [
        f"{name}: {r['status']} {r.get('code')} {r['summary'][:160]}"
        for name, r in results.items()
        if name != "_report"
    ]
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


def _dcgmi(folder: Path, output: str, call: str) -> Path:
    """A stand-in dcgmi (DCGM cannot run here, tests/staging/dcgmi.py) that records its arguments, prints a DCGM
    4.x diagnostic document for `call` and DCGM's healthy health report (NVIDIA/DCGM#263) on every group."""
    bin_dir = folder / "bin"
    answers: dict[str, tuple[int, str] | str] = {f"health -g {g} -c -j": (0, HEALTHY_263) for g in "gas"}
    dcgmi.install(bin_dir, {**answers, call: (0, output)})
    return bin_dir


def _diag(status: str, gpu: int) -> str:
    return json.dumps(
        {
            "DCGM Diagnostic": {
                "test_categories": [
                    {
                        "category": "Hardware",
                        "tests": [
                            {
                                "name": "memory",
                                "results": [{"entity_id": gpu, "status": status}],
                                "test_summary": {"status": status},
                            }
                        ],
                    }
                ]
            }
        }
    )


@pytest.mark.parametrize(
    "held, status, expect_call, exit_code",
    [
        (range(4), "Pass", "diag -r 1 -j -i 4,5,6,7", 0),  # DCGM runs on the GPUs nobody holds
        (range(8), "Pass", "", 0),  # every GPU held: not run at all
        (
            range(4),
            "Fail",
            "diag -r 1 -j -i 4,5,6,7",
            1,
        ),  # the broken twin: a free GPU fails DCGM's memory test
    ],
)
def test_dcgm_runs_only_on_the_gpus_no_other_job_holds(
    tmp_path_factory: pytest.TempPathFactory, held: range, status: str, expect_call: str, exit_code: int
) -> None:
    """A job holds some GPUs (NVML's processes); the prolog's dcgm.diag passes `-i` with the others, or skips when
    none is free, so DCGM's 'busy or unavailable' on another job's GPU is never read as this node's fault."""
    folder = tmp_path_factory.mktemp("dcgm")
    bin_dir = _dcgmi(folder, _diag(status, 5), expect_call or "diag -r 1 -j")
    node = Node(eight_gpus(**{f"g{i}": {"nvml": JOB, "ctx_code": 2} for i in held}), kmsg=BOOT)
    with staged_node(node, folder) as staged:
        done, results = staged.envcheck(*HOST, env={"PATH": f"{bin_dir}:/usr/bin:/bin"})
    calls = "\n".join(c for c in dcgmi.calls(bin_dir) if c.startswith("diag"))
    assert calls == expect_call and done.returncode == exit_code, _verdict(done, results)
    if not expect_call:
        assert (
            results["dcgm.diag"]["status"] == "skip"
            and "every GPU is held" in results["dcgm.diag"]["summary"]
        )


# The torch path's cuda.devices on a shared node. Staged: torch's CUDA boundary (this torch is a CPU build: device
# count, properties and the free/total memory each GPU reports are patched in, as torch reports them on the GPU),
# plus the node's NVML. Real: the PID namespace the check reads (kthreadd at pid 2, or a container's own).
DEVICES = """
import json, types
import torch
from envcheck.checks import cuda
from envcheck.core.check import Context
GIB = 2**30
free = {0: int(0.5 * GIB), 1: 70 * GIB}
torch.cuda.is_available = lambda: True
torch.cuda.device_count = lambda: 2
torch.cuda.get_device_properties = lambda i: types.SimpleNamespace(name="NVIDIA H100 80GB HBM3", pci_domain_id=0,
                                                                   pci_bus_id=(0x18, 0x2a)[i], pci_device_id=0)
cuda._fill_and_verify = lambda i, f: (True, free[i], 80 * GIB, int(80 * GIB * f) // 4)
r = cuda.cuda_devices(Context(allow_cpu=True))
print(json.dumps({"status": r.status.value, "code": r.code, "summary": r.summary,
                  "class": r.fault_class.value if r.fault_class else None}))
"""


@pytest.mark.parametrize(
    "gpu0, pid_namespace, status, code, said",
    [
        ({"nvml": JOB}, False, "pass", None, "in use by pid 4242"),  # another job's memory: busy, not tested
        ({"nvml": {"memory_used_mib": 79500}}, True, "pass", None, "processes outside this container's view"),
        ({"nvml": {"memory_used_mib": 79500}}, False, "fail", "cuda.memory_leaked", "no process holds it"),
    ],
)
def test_a_full_gpu_is_busy_when_someone_holds_it_and_the_node_only_when_nobody_does(
    tmp_path_factory: pytest.TempPathFactory,
    gpu0: dict[str, Any],
    pid_namespace: bool,
    status: str,
    code: str | None,
    said: str,
) -> None:
    """cuda.devices once failed every GPU of a running PyTorch job (the caching allocator holds ~95%) as a
    node fault. Now: a visible holder or a PID namespace that hides the holders is busy; the host's full view
    with no process at all is leaked memory, the node's."""
    import sys

    folder = tmp_path_factory.mktemp("devices")
    with staged_node(Node(eight_gpus(g0=gpu0), kmsg=BOOT), folder) as staged:
        argv = [sys.executable, "-c", DEVICES]
        if pid_namespace:  # a container's PID namespace: NVML lists no other container's processes
            argv = ["unshare", "--pid", "--fork", "--mount-proc", *argv]
        done = staged.run(argv)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["status"] == status and got["code"] == code and said in got["summary"], got
    assert got["class"] == ("node" if status == "fail" else None), got


def test_a_preflight_without_gpu_access_is_the_pods_spec(tmp_path_factory: pytest.TempPathFactory) -> None:
    """A pod's preflight with a --profile in a container started without GPU access (no /dev/nvidia*, no driver):
    the pod spec's fault (config, exit 0); the node modes run on the host and call the same picture the node's."""
    node = Node(eight_gpus(), driver=False, how="cdi", given=(), kmsg=[])
    with staged_node(node, tmp_path_factory.mktemp("nogpu")) as staged:
        done, results = staged.envcheck(
            "--for", "preflight", "--only", "node.profile", "--profile", "h100-sxm-8"
        )
    assert done.returncode == 0 and results["node.profile"]["fault_class"] == "config", _verdict(
        done, results
    )
    assert "docker run --gpus all" in results["node.profile"]["remediation"], _verdict(done, results)
