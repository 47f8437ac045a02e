"""dcgm.diag against `dcgmi diag -j` outputs, through a stand-in `dcgmi` on PATH (simulated: no GPU, driver or
DCGM exists here). The stand-in is a shell script printing a document of tests/checks/dcgm/documents.py (each cited
there); the check runs it as it would run the real binary (a child process within the budget). NVML, where a test
needs the GPUs' PCI addresses, is the suite's one NVML stand-in (tests/staging/nvml.py); the cluster policy is real.
A host engine that is not running answers as dcgmi's Command.cpp words it: "Error: unable to establish a connection
to the specified host: localhost" / "Error: Unable to connect to host engine. Host engine connection
invalid/disconnected.".
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from envcheck.checks.dcgm import dcgm_diag
from envcheck.cluster.mode_names import ModeName
from envcheck.cluster.policy import NODE_FAULT, OK, decide
from envcheck.core.check import Context, Level
from envcheck.core.result import FaultClass, Result, Status
from tests.checks.dcgm import documents as d
from tests.staging import nvml

# Some verdicts here rest on whether an nv-hostengine process runs, which other tests start and stop.
pytestmark = pytest.mark.host

NO_ENGINE = (
    "Error: unable to establish a connection to the specified host: localhost\n"
    "Error: Unable to connect to host engine. Host engine connection invalid/disconnected.\n"
)


def stand_in(bin_dir: Path, name: str, body: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / name
    script.write_text(f'#!/bin/sh\necho "$@" >> {bin_dir}/{name}.calls\n{body}\n')
    script.chmod(0o755)


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "bin"
    d.mkdir()
    monkeypatch.setenv("PATH", f"{d}:/usr/bin:/bin")
    return d


def run(
    bin_dir: Path, output: str, level: Level = Level.QUICK, deadline_s: float = 30.0
) -> tuple[Result, str]:
    (bin_dir / "out.txt").write_text(output)
    stand_in(bin_dir, "dcgmi", f"cat {bin_dir}/out.txt")
    result = dcgm_diag(Context(level=level, deadline=time.monotonic() + deadline_s)).named("dcgm.diag", 0.0)
    calls = (bin_dir / "dcgmi.calls").read_text() if (bin_dir / "dcgmi.calls").exists() else ""
    return result, calls


def test_a_failed_dcgm_test_is_a_node_fault_naming_the_test_gpu_and_text(bin_dir: Path) -> None:
    result, calls = run(bin_dir, d.V3_3_9)
    assert calls == "diag -r 1 -j\n"  # quick level: DCGM's level 1
    assert result.status is Status.FAIL and result.fault_class is FaultClass.NODE
    assert result.code == "dcgm.diag.gpu_memory"
    assert result.summary.startswith(
        "DCGM test 'GPU Memory' (Hardware) failed on GPU 1 (serial 1652223012346): Found 4 faulty memory elements"
    )
    assert decide([result], ModeName.PROLOG).code is NODE_FAULT


def test_a_failing_gpu_is_named_by_its_pci_address(
    bin_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DCGM's GPU id is the NVML index (DcgmCacheManager.cpp): NVML gives its PCI address."""
    nvml.install(monkeypatch, tmp_path / "nvml", nvml.state(nvml.gpu(0), nvml.gpu(1, bus="0000:c1:00.0")))
    result, _ = run(bin_dir, d.V3_3_9)
    assert "failed on GPU 1 (0000:c1:00, serial 1652223012346)" in result.summary
    assert result.measured["findings"][-1]["pci"] == ["0000:c1:00"]


def test_skips_pass_and_the_full_level_runs_level_2(bin_dir: Path) -> None:
    result, calls = run(bin_dir, d.ALL_SKIP_3_3, level=Level.FULL)
    assert calls == "diag -r 2 -j\n"
    assert result.status is Status.PASS, result.summary


def test_a_setting_dcgm_flags_warns_and_never_drains(bin_dir: Path) -> None:
    """The real GB10 run: persistence mode off, written "Fail" by dcgmi; the healthy twin of the failure above."""
    result, _ = run(bin_dir, d.GB10_4_2_3)
    assert result.status is Status.WARN and result.code == "dcgm.config"
    assert "Persistence mode for GPU 0 is disabled" in result.summary
    assert decide([result], ModeName.PROLOG).code is OK and decide([result], ModeName.NPD).code is OK


def test_a_dcgmi_that_does_not_answer_names_a_hung_hostengine(bin_dir: Path, hostengine: int) -> None:
    """nv-hostengine's process runs (tests/checks/dcgm/conftest.py); with none, see test_hostengine."""
    stand_in(bin_dir, "dcgmi", "exec sleep 30")
    began = time.monotonic()
    result = dcgm_diag(Context(deadline=time.monotonic() + 4.0))  # budget: 4 s left minus 2 s of margin
    assert time.monotonic() - began < 4.0
    assert result.status is Status.FAIL and result.code == "dcgm.hostengine_hang"
    assert result.fault_class is FaultClass.NODE
    assert result.summary.startswith("dcgmi diag -r 1 -j did not return within 2 s (sleeping")


def test_no_host_engine_is_never_evidence_against_the_node(bin_dir: Path) -> None:
    result, _ = run(bin_dir, NO_ENGINE)
    assert result.status is Status.ERROR and result.fault_class is None
    assert result.code == "dcgm.hostengine_down"


CUT = d.GB10_4_2_3[: len(d.GB10_4_2_3) // 2]


@pytest.mark.parametrize("output", [d.RUNTIME_ERROR_4X, CUT, CUT + "\nSegmentation fault (core dumped)\n"])
def test_a_run_dcgm_could_not_finish_cannot_be_judged(bin_dir: Path, output: str) -> None:
    """DCGM's runtime_error (the old reader passed it as 0 tests) and a cut-off document: one line, no class."""
    result, _ = run(bin_dir, output)
    assert result.status is Status.ERROR and result.fault_class is None and result.code == "dcgm.no_result"
    assert result.summary.startswith("cannot judge: dcgmi diag -r 1 -j")
    assert decide([result], ModeName.PROLOG).code is OK


def test_a_mig_configuration_dcgm_refuses_skips_naming_mig(bin_dir: Path) -> None:
    result, _ = run(bin_dir, d.MIG_REFUSED_4X)
    assert result.status is Status.SKIP and "MIG is enabled, but no compute instances" in result.summary


def test_mig_skips_with_the_reason_and_never_runs_dcgmi(bin_dir: Path) -> None:
    stand_in(bin_dir, "nvidia-smi", "printf '0, Enabled\\n1, Disabled\\n'")
    result, calls = run(bin_dir, d.V3_3_9)
    assert result.status is Status.SKIP and calls == ""
    assert result.summary.startswith("MIG is enabled on GPU 0: DCGM's diagnostic does not run")


def test_no_dcgmi_skips(bin_dir: Path) -> None:
    result = dcgm_diag(Context())
    assert result.status is Status.SKIP and result.summary.startswith("dcgmi not installed")
