"""The CLI as a user runs it: exit codes 0/1/2, reports that parse, one-line errors for bad input."""

from __future__ import annotations

import json
import os
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from envcheck.checks.check_registry import registry
from envcheck.report.json_report import parse_report
from tests.helpers import load_report, no_gpu_env, run_cli

CPU_SAFE = "container.shm,container.limits"


def test_exit_0_when_nothing_fails(tmp_path: Path) -> None:
    done = run_cli("run", "--only", CPU_SAFE, "--allow-cpu", "--json", str(tmp_path / "r.json"))
    assert done.returncode == 0, done.stdout + done.stderr
    report = parse_report((tmp_path / "r.json").read_text())
    assert [r.name for r in report.results] == ["container.shm", "container.limits"]


def test_exit_1_without_gpu_when_strict_and_json_on_stdout_alone() -> None:
    """Every GPU is hidden (CUDA_VISIBLE_DEVICES=""), so this holds on a GPU host too."""
    done = run_cli("--only", "cuda.available", "--json", "-", env=no_gpu_env())
    assert done.returncode == 1
    data = load_report(done.stdout)  # stdout holds the JSON and nothing else; it follows the schema
    (result,) = data["results"]
    assert result["status"] == "fail" and result["remediation"]
    assert data["schema_version"] == 2 and "platform" in data["facts"]
    assert data["verdict"] == "fail" and data["counts"]["fail"] == 1
    assert "cuda.available" in done.stderr  # the table went to stderr


@pytest.mark.long  # the whole full level through the CLI; `make test` runs it in its `long` stream
def test_json_and_junit_contain_every_check(tmp_path: Path, full_level_compile_cache: Path) -> None:
    done = run_cli(
        "run",
        "--level",
        "full",
        "--allow-cpu",
        "--json",
        str(tmp_path / "r.json"),
        "--junit",
        str(tmp_path / "r.xml"),
        env={**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(full_level_compile_cache)},
        timeout=600,
    )
    names = set(registry())
    data = load_report((tmp_path / "r.json").read_text())
    assert {r["name"] for r in data["results"]} == names
    assert data["exit_code"] == done.returncode
    suite = ET.parse(tmp_path / "r.xml").getroot().find("testsuite")
    assert suite is not None
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert set(cases) == names
    for r in data["results"]:
        tag = {"fail": "failure", "error": "error", "skip": "skipped"}.get(r["status"])
        if tag:
            assert cases[r["name"]].find(tag) is not None, r
        status = cases[r["name"]].find("properties/property[@name='status']")
        assert status is not None and status.get("value") == r["status"]
    assert suite.get("timestamp") and suite.get("hostname")
    props = {p.get("name"): p.get("value") for p in suite.findall("properties/property")}
    assert (
        props["envcheck.verdict"] == data["verdict"] and props["torch"] == data["facts"]["torch"]["version"]
    )
    assert props["envcheck.warn"] == str(data["counts"]["warn"])


@pytest.mark.parametrize(
    "args, needle",
    [
        (
            ["run", "--only", "nope.nothing"],
            "unknown check name(s): nope.nothing; valid names: cuda.available",
        ),
        (["run", "--skip", "cuda.availabl"], "unknown check name(s): cuda.availabl"),
        (["run", "--timeout", "0"], "must be positive"),
        (["run", "--timeout", "-3"], "must be positive"),
        (["run", "--level", "deep"], "invalid choice: 'deep'"),
        (["run", "--json", "/nonexistent-dir/r.json"], "folder /nonexistent-dir does not exist"),
        (["run", "--junit", "/proc/version"], "cannot write /proc/version"),
        (["run", "--expect-gpus", "two"], "is not a whole number"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        (["facts", "--json", "/"], "is a directory"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], needle: str) -> None:
    done = run_cli(*args)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert needle in lines[0]
    assert done.stdout == ""


def test_list_names_every_check() -> None:
    done = run_cli("list")
    assert done.returncode == 0
    for name in registry():
        assert name in done.stdout


def test_facts_json_is_structured_and_says_why_values_are_absent() -> None:
    done = run_cli(
        "facts",
        "--json",
        "-",
        env={"PATH": "/usr/bin:/bin", "NVIDIA_API_TOKEN": "hunter2", "NVIDIA_VISIBLE_DEVICES": "all"},
    )
    assert done.returncode == 0, done.stderr
    facts = json.loads(done.stdout)
    assert facts["env"]["NVIDIA_API_TOKEN"] == "<redacted>" and "hunter2" not in done.stdout
    assert facts["env"]["NVIDIA_VISIBLE_DEVICES"] == "all"
    assert facts["torch"]["version"]
    assert facts["cuda_visible_devices"] == {"absent": "not set (all GPUs visible)"}
    if isinstance(facts["gpu"]["source"], dict):  # no GPU here: the reason is spelled out
        assert "NVML" in facts["gpu"]["source"]["absent"]
    else:  # a GPU host (NVML ignores CUDA_VISIBLE_DEVICES, so it cannot be hidden): an inventory
        assert facts["gpu"]["source"] in ("nvml", "nvidia-smi") and facts["gpu"]["gpus"]
    assert isinstance(facts["shm_bytes"], int)
    assert set(facts["ulimits"]) == {"memlock_bytes", "stack_bytes", "nofile"}


def test_ctrl_c_exits_130_without_traceback_and_leaves_nothing() -> None:
    """Ctrl-C (SIGINT to the foreground process group) mid-run: exit 130, one line, every process gone, no
    launcher work directory left."""
    import signal
    import subprocess
    import sys
    import time
    import uuid

    from tests.helpers import ROOT, descendants, processes_with_marker, sigint_default

    marker = f"envcheck-ctrl-c-{uuid.uuid4().hex}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "envcheck", "run", "--allow-cpu", "--level", "full"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env={**os.environ, "ENVCHECK_TEST_MARKER": marker},
        preexec_fn=sigint_default,
    )
    try:
        deadline = time.monotonic() + 60
        seen: set[int] = set()
        while time.monotonic() < deadline and len(seen) < 3:  # the fork server and its workers are running
            seen.update(descendants(proc.pid))
            time.sleep(0.1)
        assert seen, "envcheck never started a worker"
        time.sleep(1.0)
        seen.update(descendants(proc.pid))
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        assert b"interrupted" in err and b"Traceback" not in err, err.decode()
        assert err.decode().strip().splitlines()[-1] == "envcheck: interrupted"
        end = time.monotonic() + 10
        while processes_with_marker(marker) and time.monotonic() < end:
            time.sleep(0.1)
        assert processes_with_marker(marker) == [], "processes left behind"
        left = [p for pid in seen for p in Path(tempfile.gettempdir()).glob(f"envcheck-dist-{pid}-*")]
        assert left == [], left
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_run_and_the_torchrun_entry_declare_the_shared_run_flags_once() -> None:
    from envcheck.app.main import build_parser
    from envcheck.distributed import parse_args

    shared = ["--level", "full", "--allow-cpu", "--min-busbw", "5", "--strict-perf", "--timeout", "30"]
    run = build_parser().parse_args(["run", *shared])
    entry = parse_args(shared)
    for name in ("level", "allow_cpu", "min_busbw", "strict_perf", "timeout"):
        assert getattr(run, name) == getattr(entry, name), name
    # --timeout keeps its torchrun meaning and default there; run's has none (no cap unless asked).
    assert parse_args([]).timeout == 120.0 and build_parser().parse_args(["run"]).timeout is None
