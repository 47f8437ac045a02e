"""The Kubernetes deployments of docs/cluster and docs/examples, run as written in the runtime image this repo builds.

Each command is read from its manifest (a doc change is a test change), run with the user, flags and mounts its
securityContext and volumes set (tests/images/k8s_run.py translates them), and judged by the contract the docs give:
its exit code, what it writes, what it says. A command that exits with a usage error, writes nothing or hides a
failure fails here.

Real: the built image, the Docker engine enforcing --user/--read-only/--cap-drop ALL/no-new-privileges/tmpfs, envcheck,
torch, torchrun's c10d and static rendezvous across two containers on a Docker network (the pods' DNS names as
network aliases), gloo. Filled placeholders: `ghcr.io/OWNER/envcheck-pytorch:<tag>` is the image built here; the
trainer's `train.py` is a one-line script mounted into /workspace; NPD's plugin `path` is envcheck's place in the
image. Staged or left out (no GPU, driver or NVIDIA runtime can exist here): `nvidia.com/gpu` limits and
`runtimeClassName: nvidia` are not applied, so the pods see no GPU, which is itself a documented shape (a pod that
was given no GPU: `config`, a warning, never a node fault); torchrun's `--nproc-per-node 8` (one rank per GPU) becomes
2 per container on CPU (gloo); for NPD's node fault and its healthy twin a stand-in libcuda.so.1
(tests/staging/libcuda.py) answers the torch-free node path's driver calls.
"""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.documented import fill, manifest, npd_rule
from tests.helpers.containers import run_streams
from tests.images.k8s_run import command, container, docker_kwargs, pod_spec, policy_action
from tests.staging.gpu_node import BUSES, STUB_NVML
from tests.staging.libcuda import build

pytestmark = [pytest.mark.docker, pytest.mark.slow]
TRAIN = "print('trained: the trainer started after the preflight')\n"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text(TRAIN)
    tmp_path.chmod(0o755)
    return tmp_path


def run_container(
    client: Any,
    image: str,
    spec: dict[str, Any],
    c: dict[str, Any],
    argv: list[str] | None = None,
    **extra: Any,
) -> tuple[int, str, str]:
    kwargs = docker_kwargs(spec, c)
    for key, value in extra.items():
        kwargs[key] = {**kwargs.get(key, {}), **value} if isinstance(value, dict) else value
    return run_streams(client, image, argv if argv is not None else command(c), timeout_s=400, **kwargs)


def test_preflight_init_container_gates_the_trainer(
    docker_client: Any, runtime_image: str, workspace: Path
) -> None:
    """docs/cluster/preflight-init-container.yaml: the init container's command as written, then (exit 0) the
    trainer's. No GPU was given to this pod (no device plugin here): preflight says so as `config` warnings and exits
    0, never 10 (that would send a healthy node's pods elsewhere)."""
    (pod,) = manifest("preflight-init-container.yaml")
    spec = pod_spec(pod)
    init, trainer = container(spec, "envcheck-preflight"), container(spec, "trainer")
    code, out, err = run_container(docker_client, runtime_image, spec, init)
    assert code == 0, err[-3000:]
    assert "Traceback" not in err and "usage error" not in err
    warnings = [line for line in err.splitlines() if line.startswith("envcheck: warning: ")]
    assert any(w.startswith("envcheck: warning: [config] cuda.") for w in warnings), warnings
    assert not any("[node]" in w for w in warnings), warnings
    assert (
        len(out.splitlines()) <= 1
    )  # the one-line reason or nothing (terminationMessagePolicy reads the log)
    code, out, err = run_container(
        docker_client,
        runtime_image,
        spec,
        trainer,
        volumes={str(workspace / "train.py"): {"bind": "/workspace/train.py", "mode": "ro"}},
    )
    assert code == 0 and "trained" in out, out + err


def test_preflight_with_a_usage_error_stops_the_pod_with_2(docker_client: Any, runtime_image: str) -> None:
    (pod,) = manifest("preflight-init-container.yaml")
    spec = pod_spec(pod)
    init = container(spec, "envcheck-preflight")
    argv = fill(" ".join(command(init)), {"--timeout 300": "--timout 300"}).split()
    code, out, err = run_container(docker_client, runtime_image, spec, init, argv=argv)
    assert code == 2 and err.count("\n") == 1, err
    assert "a usage error in the preflight command" in err


@pytest.mark.parametrize(
    "case, trainer, typo, action",
    [
        ("healthy", TRAIN, None, "Succeeded"),
        ("the trainer fails", "raise SystemExit(1)\n", None, "Count"),
        ("a usage error", TRAIN, ("--expect-gpus 8", "--expect-gpu 8 --nodes 2"), "FailJob"),
    ],
)
def test_job_command_and_its_pod_failure_policy(
    docker_client: Any,
    runtime_image: str,
    tmp_path: Path,
    case: str,
    trainer: str,
    typo: tuple[str, str] | None,
    action: str,
) -> None:
    """docs/cluster/job-pod-failure-policy.yaml: `envcheck run --for preflight ... && exec python train.py` as the
    Job's container runs it; the exit code goes through the Job's own podFailurePolicy rules."""
    (job,) = manifest("job-pod-failure-policy.yaml")
    spec = pod_spec(job)
    train = container(spec, "train")
    argv = command(train)
    if typo is not None:
        argv = [*argv[:-1], fill(argv[-1], dict([typo]))]
    (tmp_path / "train.py").write_text(trainer)
    tmp_path.chmod(0o755)
    code, out, err = run_container(
        docker_client,
        runtime_image,
        spec,
        train,
        argv=argv,
        volumes={str(tmp_path / "train.py"): {"bind": "/workspace/train.py", "mode": "ro"}},
    )
    assert policy_action(job, "train", code) == action, (case, code, out, err[-2000:])
    assert ("trained" in out) == (trainer == TRAIN and typo is None), out
    assert "Traceback" not in err or case == "the trainer fails"


@pytest.fixture(scope="module")
def libdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = build(tmp_path_factory.mktemp("libcuda"))
    folder.chmod(0o755)
    return folder


@pytest.mark.parametrize(
    "case, stub, code, first",
    [
        ("healthy node", {"STUB_COUNT": "8"}, 0, "envcheck: node OK"),
        ("fabric manager down", {"STUB_COUNT": "8", "STUB_INIT": "802"}, 1, "[node] "),
        ("a usage error", {"STUB_COUNT": "8"}, 2, ""),
    ],
)
def test_npd_plugin_command_and_its_exit_code_contract(
    docker_client: Any,
    runtime_image: str,
    libdir: Path,
    case: str,
    stub: dict[str, str],
    code: int,
    first: str,
    tmp_path: Path,
) -> None:
    """docs/cluster/npd-envcheck-plugin.json: NPD runs `path args` and reads 0 OK, 1 problem (stdout's first line,
    at most max_output_length, is the condition's message), 2 unknown; its own timeout must outlast envcheck's."""
    rule = npd_rule()
    plugin = json.loads(
        (Path(__file__).resolve().parents[2] / "docs/cluster/npd-envcheck-plugin.json").read_text()
    )
    limit = plugin["pluginConfig"]["max_output_length"]
    args = rule["args"]
    budget = float(args[args.index("--timeout") + 1])
    assert budget < _seconds(rule["timeout"]) and budget < _seconds(plugin["pluginConfig"]["timeout"])
    argv = [
        "envcheck",
        *args,
    ]  # NPD's `path` (/usr/local/bin/envcheck in its container): the image's envcheck
    if case == "a usage error":
        argv = [*argv, "--expect-gpu-count", "8"]
    # A node's GPUs as the image sees them through the container toolkit: /dev/nvidia0..7, nvidiactl and nvidia-uvm
    # (character nodes made in a temp dir and passed with --device: Docker re-creates them and allows them in the
    # container's device cgroup), the stand-in libcuda and the NVML stand-in (tests/staging) answering for 8 GPUs.
    nodes = tmp_path / "dev"
    nodes.mkdir()
    devices = []
    for name, major, minor in [
        *((f"nvidia{i}", 195, i) for i in range(8)),
        ("nvidiactl", 195, 255),
        ("nvidia-uvm", 510, 0),
    ]:
        os.mknod(nodes / name, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
        (nodes / name).chmod(0o666)  # as the driver makes them (mknod's mode passes through the umask)
        devices.append(f"{nodes / name}:/dev/{name}:rw")
    tmp_path.chmod(0o755)  # read by the image's non-root user
    (tmp_path / "nvml.json").write_text(
        json.dumps(
            {
                "gpus": [
                    {"bus": bus, "minor": i, "uuid": f"GPU-{i:08x}-1c2b-4d5e-8f90-a1b2c3d4e5f6"}
                    for i, bus in enumerate(BUSES)
                ]
            }
        )
    )
    env = {
        "LD_LIBRARY_PATH": "/opt/stub-libcuda",
        "PYTHONPATH": "/opt/stub-nvml",
        "STUB_NVML_STATE": "/opt/stub-state/nvml.json",
        **stub,
    }
    started = time.monotonic()
    rc, out, err = run_streams(
        docker_client,
        runtime_image,
        argv,
        timeout_s=budget + 60,
        environment=env,
        devices=devices,
        volumes={
            str(libdir): {"bind": "/opt/stub-libcuda", "mode": "ro"},
            str(STUB_NVML): {"bind": "/opt/stub-nvml", "mode": "ro"},
            str(tmp_path): {"bind": "/opt/stub-state", "mode": "ro"},
        },
    )
    assert rc == code, (case, out, err[-2000:])
    assert time.monotonic() - started < budget
    if first:
        line = out.splitlines()[0]
        assert line.startswith(first) and len(line) <= limit, out
    else:
        assert "a usage error in the npd command" in err, err
    assert "Traceback" not in err


def _seconds(text: str) -> float:
    return float(text[:-1]) * {"s": 1, "m": 60, "h": 3600}[text[-1]]


def _wait_all(containers: list[Any], timeout_s: float) -> list[int]:
    deadline = time.monotonic() + timeout_s
    codes = []
    for c in containers:
        try:
            codes.append(int(c.wait(timeout=max(1.0, deadline - time.monotonic()))["StatusCode"]))
        except Exception:
            logs = "\n".join(x.logs().decode(errors="replace")[-3000:] for x in containers)
            pytest.fail(f"torchrun containers did not finish in {timeout_s}s:\n{logs}")
    return codes


@pytest.fixture
def network(docker_client: Any) -> Any:
    net = docker_client.networks.create(f"envcheck-dist-test-{time.monotonic_ns()}", driver="bridge")
    yield net
    net.remove()


def _two_pods(
    docker_client: Any,
    runtime_image: str,
    network: Any,
    pods: list[tuple[str, list[str], dict[str, str], list[str]]],
    shm: str | None,
) -> tuple[list[int], list[str], Any]:
    """Start one container per pod (hostname, argv, env, DNS aliases) on `network`; their exit codes and logs."""
    started = []
    try:
        for hostname, argv, env, aliases in pods:
            c = docker_client.containers.create(
                runtime_image,
                argv,
                hostname=hostname,
                environment=env,
                shm_size=shm,
                name=f"{hostname}-{network.name[-8:]}",
                detach=True,
            )
            network.connect(c, aliases=aliases)
            started.append(c)
        for c in started:
            c.start()
        codes = _wait_all(started, 400)
        logs = [c.logs().decode(errors="replace") for c in started]
        archive = started[0].get_archive("/tmp") if started else None
        return codes, logs, archive
    finally:
        for c in started:
            c.remove(force=True)


def _why(log: str) -> str:
    """A pod's log for a failed assertion: the lines that name a failure or an error (the table's failing row and
    summary, a rank's exception) with the rest of a table row they start (its cells wrap onto the lines below, whose
    first cell is blank: a rank's error text is there), then the log's tail; the tail alone cut the failing row off."""
    lines = log.splitlines()
    kept: dict[int, str] = {}
    for i, line in enumerate(lines):
        if any(w in line for w in ("FAIL", "did not all finish", "Error")):
            kept[i] = line
            for j in range(i + 1, min(i + 30, len(lines))):
                cells = lines[j].split("│")
                if len(cells) < 3 or cells[0].strip() or cells[1].strip():  # not a wrapped line of this row
                    break
                kept[j] = lines[j]
    return "\n".join(list(kept.values())[:80]) + "\n...\n" + log[-2000:]


def _torchrun_argv(argv: list[str]) -> list[str]:
    """One rank per GPU (--nproc-per-node 8) is 2 ranks per container on CPU here: the only change."""
    out = [a.replace("--nproc-per-node=8", "--nproc-per-node=2") for a in argv]
    assert out != argv or "--nproc-per-node" not in " ".join(argv), argv
    return out


def test_indexed_job_runs_torchrun_across_two_pods(
    docker_client: Any, runtime_image: str, network: Any
) -> None:
    """docs/examples/k8s-indexed-job.yaml: two pods of an Indexed Job, pod 0 reachable as
    envcheck-dist-0.envcheck-dist (the headless Service's DNS name), c10d rendezvous there; every rank's collectives
    cross the Docker network."""
    service, job = manifest("k8s-indexed-job.yaml")
    spec = pod_spec(job)
    (c,) = spec["containers"]
    endpoint = next(a for a in command(c) if a.startswith("--rdzv-endpoint=")).split("=", 1)[1].split(":")[0]
    subdomain = spec["subdomain"]
    assert endpoint == f"{job['metadata']['name']}-0.{subdomain}" and service["metadata"]["name"] == subdomain
    pods = [
        (
            f"{job['metadata']['name']}-{i}",
            _torchrun_argv(command(c)),
            {"JOB_COMPLETION_INDEX": str(i)},
            [f"{job['metadata']['name']}-{i}.{subdomain}", f"{job['metadata']['name']}-{i}"],
        )
        for i in range(2)
    ]
    shm = docker_kwargs(spec, c).get("shm_size")
    codes, logs, _ = _two_pods(docker_client, runtime_image, network, pods, shm)
    assert codes == [0, 0], "\n".join(_why(log) for log in logs)
    for log in logs:
        assert "Traceback" not in log
    assert "over 4 gloo ranks" in logs[0], logs[0][-3000:]


def test_pytorchjob_runs_torchrun_across_master_and_worker(
    docker_client: Any, runtime_image: str, network: Any
) -> None:
    """docs/examples/k8s-pytorchjob.yaml: the training operator starts Master and Worker with PET_NNODES,
    PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR, PET_MASTER_PORT (as its comment says), which torchrun reads
    as its defaults; the command is the manifest's, and the Master's --json report is read back from its /tmp."""
    import io
    import tarfile

    (job,) = manifest("k8s-pytorchjob.yaml")
    specs = job["spec"]["pytorchReplicaSpecs"]
    master = specs["Master"]["template"]["spec"]["containers"][0]
    assert specs["Worker"]["template"]["spec"]["containers"][0] == master  # one pod template (YAML anchor)
    nproc = "2"  # spec.nprocPerNode is 8, one rank per GPU; 2 per container on CPU here
    assert job["spec"]["nprocPerNode"] == "8"
    base = {
        "PET_NNODES": "2",
        "PET_NPROC_PER_NODE": nproc,
        "PET_MASTER_ADDR": "envcheck-dist-master-0",
        "PET_MASTER_PORT": "23456",
    }
    pods = [
        (
            "envcheck-dist-master-0",
            command(master),
            {**base, "PET_NODE_RANK": "0"},
            ["envcheck-dist-master-0"],
        ),
        (
            "envcheck-dist-worker-0",
            command(master),
            {**base, "PET_NODE_RANK": "1"},
            ["envcheck-dist-worker-0"],
        ),
    ]
    shm = docker_kwargs(specs["Master"]["template"]["spec"], master).get("shm_size")
    codes, logs, archive = _two_pods(docker_client, runtime_image, network, pods, shm)
    assert codes == [0, 0], "\n".join(_why(log) for log in logs)
    stream, _ = archive
    with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
        member = tar.extractfile("tmp/envcheck-dist.json")
        assert member is not None, "the Master wrote no --json report"
        report = json.loads(member.read())
    results = {r["name"]: r for r in report["results"]}
    assert results["dist.all_reduce"]["status"] == "pass"
    assert results["dist.all_reduce"]["measured"]["world_size"] == 4
    assert results["dist.pairs"]["status"] != "error"  # two nodes: the pairwise test has something to pair


def test_the_npd_prometheus_command_writes_its_textfile(docker_client: Any, runtime_image: str) -> None:
    """`docker run --rm <runtime image> envcheck run --for npd --prometheus /tmp/envcheck.prom` once exited 2
    ("needs prometheus_client") in an image without the cluster extra. Now it runs its checks and writes.
    This container is given no GPU (no NVIDIA runtime here; the image sets NVIDIA_VISIBLE_DEVICES=all): npd answers
    "unknown" (2, not a usage error) with the container's configuration named, and claims no node fault."""
    script = "envcheck run --for npd --prometheus /tmp/envcheck.prom; rc=$?; cat /tmp/envcheck.prom; exit $rc"
    code, out, err = run_streams(docker_client, runtime_image, ["sh", "-c", script], timeout_s=300)
    assert code == 2 and out.startswith("envcheck: could not judge the node"), out + err[-2000:]
    assert "usage error" not in err, err[-2000:]
    assert "needs prometheus_client" not in err and 'envcheck_usage_error{mode="npd"} 0.0' in out, out + err
    assert (
        'envcheck_finding{check="node.cuda_driver",code="cuda.container",fault_class="config"} 1.0' in out
    ), out
    assert "envcheck_node_fault 0.0" in out, out
