"""`envcheck run --for ... --prometheus FILE` end to end, the textfile read back by prometheus_client's parser."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from envcheck import __version__
from envcheck.app import output
from envcheck.app.output import WriteError, write_output
from envcheck.cluster import prometheus
from envcheck.core.result import failed, passed
from tests.staging.gpu_node import Node, eight_gpus, staged_node

ROOT = Path(__file__).resolve().parents[2]


def envcheck(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "envcheck", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
        check=False,
    )


def samples(path: Path) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(path.read_text())
        for s in fam.samples
    }


def test_prolog_node_fault_exit_reason_and_textfile(tmp_path: Path) -> None:
    """A host whose driver is gone (8 GPUs on its PCI bus, no module, no device node: staged, see
    tests/staging/gpu_node.py; on this machine, itself a container, a host shape hides the container's mark), a
    prolog expecting a GPU: the node's fault, in the exit code, the reason and the textfile."""
    prom = tmp_path / "envcheck.prom"
    before = time.time()
    with staged_node(Node(eight_gpus(), driver=False, kmsg=[]), tmp_path / "node") as node:
        done = node.run(
            [
                sys.executable,
                "-m",
                "envcheck",
                "run",
                "--for",
                "prolog",
                "--expect-gpus",
                "1",
                "--only",
                "cuda.available,cuda.devices,container.shm",
                "--prometheus",
                str(prom),
            ],
            timeout=300,
        )
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines() == [
        "[node] cuda.available: CUDA is not available: no /dev/nvidia* device nodes and no /proc/driver/nvidia: "
        "no NVIDIA driver is loaded on this host (+1 more) (+1 more node faults)"
    ]
    got = samples(prom)
    assert got[("envcheck_check_status", (("check", "cuda.available"), ("status", "fail")))] == 1
    assert got[("envcheck_check_status", (("check", "container.shm"), ("status", "pass")))] == 1
    assert got[("envcheck_check_status", (("check", "container.shm"), ("status", "fail")))] == 0
    assert got[("envcheck_check_fault", (("check", "cuda.devices"), ("fault_class", "node")))] == 1
    assert ("envcheck_check_duration_seconds", (("check", "cuda.available"),)) in got
    assert got[("envcheck_gpus", ())] == 0
    assert got[("envcheck_node_fault", ())] == 1
    assert got[("envcheck_exit_code", (("mode", "prolog"),))] == 1
    assert before <= got[("envcheck_last_run_timestamp_seconds", ())] <= time.time()
    assert got[("envcheck_build_info", (("version", __version__),))] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["envcheck.prom", "node"]  # no temp file left behind


def test_an_image_fault_warns_and_exits_0_in_every_mode(tmp_path: Path) -> None:
    """Image and config faults never fail a node's gate: a warning in the job's output, exit 0."""
    args = ("run", "--allow-cpu", "--only", "image.versions,container.shm")
    prolog = envcheck(*args, "--for", "prolog", env={"ENVCHECK_IMAGE": "1"})
    assert prolog.returncode == 0, prolog.stderr
    assert prolog.stdout == ""
    assert "envcheck: warning: [image] image.versions:" in prolog.stderr
    preflight = envcheck(*args, "--for", "preflight", env={"ENVCHECK_IMAGE": "1"})
    assert preflight.returncode == 0, preflight.stderr
    assert "envcheck: warning: [image] image.versions:" in preflight.stderr
    npd = envcheck(*args, "--for", "npd", env={"ENVCHECK_IMAGE": "1"})
    assert (npd.returncode, npd.stdout) == (0, "envcheck: node OK\n")


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("/no/such/folder/x.prom", "folder /no/such/folder does not exist"),
        (".", "is not a file path"),
    ],
)
def test_bad_prometheus_path_is_one_line_exit_2_before_any_check(path: str, why: str) -> None:
    began = time.monotonic()
    done = envcheck("run", "--prometheus", path)
    assert done.returncode == 2
    assert done.stdout == "" and len(done.stderr.splitlines()) == 1 and why in done.stderr
    assert time.monotonic() - began < 20  # a full run takes longer: nothing ran


def test_bad_mode_is_one_line_exit_2() -> None:
    done = envcheck("run", "--for", "slurm")
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1 and "prolog" in done.stderr


def test_busbw_and_matmul_figures_when_measured(tmp_path: Path) -> None:
    results = [
        passed("busbw", measured={"peak_busbw_gbps": 12.5}).named("dist.busbw", 3),
        passed("mm", measured={"matmul_tflops": 600.0}).named("some.matmul", 1),
        passed("gpus", measured={"gpus": ["H100", "H100"]}).named("cuda.available", 1),
    ]
    path = tmp_path / "m.prom"
    write_output(str(path), prometheus.render(results, {}, mode="npd", exit_code=0, now=1.0))
    got = samples(path)
    assert got[("envcheck_allreduce_busbw_gbps", ())] == 12.5
    assert got[("envcheck_matmul_tflops", ())] == 600.0
    assert got[("envcheck_gpus", ())] == 2
    assert got[("envcheck_last_run_timestamp_seconds", ())] == 1.0


def test_not_measured_figures_are_absent(tmp_path: Path) -> None:
    path = tmp_path / "m.prom"
    write_output(
        str(path),
        prometheus.render(
            [failed("x", fault_class="image").named("vision.ops", 1)], {}, mode="run", exit_code=1
        ),
    )
    names = {name for name, _ in samples(path)}
    assert not names & {"envcheck_gpus", "envcheck_allreduce_busbw_gbps", "envcheck_matmul_tflops"}


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "m.prom"
    path.write_text("old\n")

    def broken_replace(src: str, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(output.os, "replace", broken_replace)
    with pytest.raises(WriteError):
        write_output(str(path), b"new\n")
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["m.prom"]


def test_the_node_paths_gpu_count_is_written(tmp_path: Path) -> None:
    """--for prolog|health|npd run no torch check: envcheck_gpus comes from gpu.health's NVML count (the GPUs this
    process was given), else node.cuda_driver's count."""
    path = tmp_path / "m.prom"
    node = [
        passed("8 GPU(s) ...", measured={"count": 8}).named("node.cuda_driver", 1),
        passed("7 GPU(s) healthy", measured={"gpus": 7}).named("gpu.health", 1),
    ]
    write_output(str(path), prometheus.render(node, {}, mode="prolog", exit_code=0))
    assert dict(samples(path))[("envcheck_gpus", ())] == 7
    write_output(str(path), prometheus.render(node[:1], {}, mode="prolog", exit_code=0))
    assert dict(samples(path))[("envcheck_gpus", ())] == 8
