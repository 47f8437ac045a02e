"""dcgm.diag against real `dcgmi diag -j` outputs, through a stand-in `dcgmi` on PATH (simulated: no GPU, driver or
DCGM exists here). The stand-in is a shell script printing the recorded document; the check runs it as it would run
the real binary (a child process within the budget).

Sources of the texts:
- DCGM 3.x document shape ("DCGM GPU Diagnostic", test_categories, tests, results with gpu_id/status) and the
  all-Skip run: https://github.com/NVIDIA/DCGM/issues/139 (`dcgmi diag -r 3 -j` on a T400).
- The GPU Memory failure on GPU 0 while GPU 1 passes, and its text: https://github.com/NVIDIA/DCGM/issues/145 and
  https://github.com/NVIDIA/go-dcgm/issues/52 ("GPU 0 Error using CUDA API cuCtxCreate ... Unable to create CUDA
  context: 'CUDA-capable device(s) is/are busy or unavailable'"), placed in the 3.x `warnings` field that DCGM's own
  test reader parses.
- DCGM 4.x key "DCGM Diagnostic" with a per-test `test_summary` (facebookresearch/gcm#38) and the `software` warning
  with error code 29 "Persistence Mode: Persistence mode for GPU 0 is disabled. ..." (NVIDIA/NVSentinel#772).
- A host engine that is not running: "Error: unable to establish a connection to the specified host: localhost" /
  "Error: Unable to connect to host engine. Host engine connection invalid/disconnected." (dcgmi's Command.cpp).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from envcheck.checks.dcgm import dcgm_diag
from envcheck.checks.dcgm.diag_json import parse
from envcheck.core.check import Context, Level
from envcheck.core.result import FaultClass, Status

CUDA_BUSY = (
    "GPU 0 Error using CUDA API cuCtxCreate Check DCGM and system logs for errors. Reset GPU. Restart DCGM. "
    "Rerun diagnostics. Unable to create CUDA context: 'CUDA-capable device(s) is/are busy or unavailable'."
)
PERSISTENCE = (
    "Persistence Mode: Persistence mode for GPU 0 is disabled. Enable persistence mode by running "
    '"nvidia-smi -i <gpuId> -pm 1 " as root.'
)


def _test(name: str, *results: dict[str, object], summary: str | None = None) -> dict[str, object]:
    test: dict[str, object] = {"name": name, "results": list(results)}
    if summary:
        test["test_summary"] = {"status": summary}
    return test


FAIL_3X = {
    "DCGM GPU Diagnostic": {
        "test_categories": [
            {
                "category": "Deployment",
                "tests": [_test("Denylist", {"gpu_ids": ["0", "1"], "status": "Pass"})],
            },
            {
                "category": "Hardware",
                "tests": [
                    _test(
                        "GPU Memory",
                        {
                            "gpu_id": "0",
                            "status": "Fail",
                            "warnings": [{"warning": CUDA_BUSY, "error_id": 12}],
                        },
                        {"gpu_id": "1", "status": "Pass"},
                    )
                ],
            },
        ]
    }
}
SKIP_3X = {
    "DCGM GPU Diagnostic": {
        "test_categories": [
            {"category": "Integration", "tests": [_test("PCIe", {"gpu_id": "0", "status": "Skip"})]},
            {
                "category": "Hardware",
                "tests": [
                    _test("GPU Memory", {"gpu_id": "0", "status": "Skip"}),
                    _test("Diagnostic", {"gpu_id": "0", "status": "Skip"}),
                ],
            },
        ]
    }
}
WARN_4X = {
    "DCGM Diagnostic": {
        "test_categories": [
            {
                "category": "Deployment",
                "tests": [
                    _test(
                        "software",
                        {
                            "entity_id": 0,
                            "status": "Warn",
                            "warnings": [{"warning": PERSISTENCE, "error_id": 29}],
                        },
                        summary="Warn",
                    )
                ],
            },
            {
                "category": "Hardware",
                "tests": [_test("memory", {"entity_id": 0, "status": "Pass"}, summary="Pass")],
            },
        ]
    }
}
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
) -> tuple[object, str]:
    (bin_dir / "out.txt").write_text(output)
    stand_in(bin_dir, "dcgmi", f"cat {bin_dir}/out.txt")
    result = dcgm_diag(Context(level=level, deadline=time.monotonic() + deadline_s))
    calls = (bin_dir / "dcgmi.calls").read_text() if (bin_dir / "dcgmi.calls").exists() else ""
    return result, calls


def test_a_failed_dcgm_test_is_a_node_fault_naming_the_test_gpu_and_text(bin_dir: Path) -> None:
    result, calls = run(bin_dir, json.dumps(FAIL_3X, indent=1))
    assert calls == "diag -r 1 -j\n"  # quick level: DCGM's level 1
    assert result.status is Status.FAIL and result.fault_class is FaultClass.NODE  # type: ignore[attr-defined]
    assert result.code == "dcgm.diag.gpu_memory"  # type: ignore[attr-defined]
    assert result.summary.startswith(  # type: ignore[attr-defined]
        "DCGM test 'GPU Memory' (Hardware) failed on GPU 0: GPU 0 Error using CUDA API cuCtxCreate"
    )


def test_skips_pass_and_the_full_level_runs_level_2(bin_dir: Path) -> None:
    result, calls = run(bin_dir, json.dumps(SKIP_3X), level=Level.FULL)
    assert calls == "diag -r 2 -j\n"
    assert result.status is Status.PASS, result.summary  # type: ignore[attr-defined]


def test_a_dcgm_warning_warns_without_draining(bin_dir: Path) -> None:
    result, _ = run(bin_dir, json.dumps(WARN_4X))
    assert result.status is Status.WARN and result.code == "dcgm.diag.software"  # type: ignore[attr-defined]
    assert "Persistence mode for GPU 0 is disabled" in result.summary  # type: ignore[attr-defined]


def test_a_dcgmi_that_does_not_answer_names_a_hung_hostengine(bin_dir: Path) -> None:
    stand_in(bin_dir, "dcgmi", "exec sleep 30")
    began = time.monotonic()
    result = dcgm_diag(Context(deadline=time.monotonic() + 4.0))  # budget: 4 s left minus 2 s of margin
    assert time.monotonic() - began < 4.0
    assert result.status is Status.FAIL and result.code == "dcgm.hostengine_hang"
    assert result.fault_class is FaultClass.NODE
    assert result.summary.startswith("dcgmi diag -r 1 -j did not return within 2 s (sleeping")


def test_no_host_engine_is_never_evidence_against_the_node(bin_dir: Path) -> None:
    result, _ = run(bin_dir, NO_ENGINE)
    assert result.status is Status.ERROR and result.fault_class is None  # type: ignore[attr-defined]
    assert result.code == "dcgm.hostengine_down"  # type: ignore[attr-defined]


def test_mig_skips_with_the_reason_and_never_runs_dcgmi(bin_dir: Path) -> None:
    stand_in(bin_dir, "nvidia-smi", "printf '0, Enabled\\n1, Disabled\\n'")
    result, calls = run(bin_dir, json.dumps(FAIL_3X))
    assert result.status is Status.SKIP and calls == ""  # type: ignore[attr-defined]
    assert result.summary.startswith("MIG is enabled on GPU 0: DCGM's diagnostic does not run")  # type: ignore


def test_no_dcgmi_skips(bin_dir: Path) -> None:
    result = dcgm_diag(Context())
    assert result.status is Status.SKIP and result.summary.startswith("dcgmi not installed")


def test_the_parser_reads_both_shapes() -> None:
    fail = parse("Successfully ran diagnostic for group.\n" + json.dumps(FAIL_3X))
    assert not isinstance(fail, str)
    assert [(t.code, t.status, t.gpus) for t in fail] == [
        ("dcgm.diag.denylist", "pass", []),
        ("dcgm.diag.gpu_memory", "fail", ["0"]),
    ]
    warn = parse(json.dumps(WARN_4X))
    assert not isinstance(warn, str) and warn[0].error_ids == [29] and warn[0].gpus == ["0"]
    assert parse("{}") == "dcgmi's JSON has none of DCGM GPU Diagnostic, DCGM Diagnostic"
