"""The stdlib scripts the workflows run: step outputs from matrix entries, and GPU verification evidence.

Run as the workflows run them (a real subprocess), with inputs shaped like the real tools' output.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.workflows.gha import ROOT

SCRIPTS = ROOT / ".github" / "scripts"
REF = "ghcr.io/acme/envcheck@sha256:" + "ab" * 32
NVIDIA_SMI = (
    "index, name, driver_version, memory.total [MiB]\n0, NVIDIA H100 80GB HBM3, 570.124.06, 81559 MiB\n"
)


def script(name: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPTS / name), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
        cwd=ROOT,
    )


def outputs(text: str) -> dict[str, str]:
    """Parse $GITHUB_OUTPUT syntax (name=value and name<<DELIM blocks) the way the runner does."""
    parsed, lines = {}, iter(text.splitlines())
    for line in lines:
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            block = []
            for inner in lines:
                if inner == delimiter:
                    break
                block.append(inner)
            else:
                raise AssertionError(f"unterminated block {name}")
            parsed[name] = "\n".join(block)
        else:
            name, value = line.split("=", 1)
            parsed[name] = value
    return parsed


def test_metadata_tags_lists_every_tag_and_a_dated_full_tag() -> None:
    proc = script("matrix_entry.py", "metadata-tags", "2.8.0-cuda12.8-runtime,2.8-runtime,latest-runtime")
    assert proc.returncode == 0, proc.stderr
    assert outputs(proc.stdout)["tags"].splitlines() == [
        "type=raw,value=2.8.0-cuda12.8-runtime",
        "type=raw,value=2.8-runtime",
        "type=raw,value=latest-runtime",
        "type=raw,value=2.8.0-cuda12.8-runtime-{{date 'YYYYMMDD'}}",
    ]


@pytest.mark.parametrize("tags", ["", "bad tag", "a,b;rm -rf /", "-leading-dash"])
def test_metadata_tags_rejects_what_docker_would(tags: str) -> None:
    proc = script("matrix_entry.py", "metadata-tags", tags)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def test_pick_gives_the_latest_entry_with_multiline_build_args(tmp_path: Path) -> None:
    old = {
        "row": "2.8-cu128",
        "target": "runtime",
        "tags": "2.8.0-cuda12.8-runtime",
        "build_args": "TORCH_VERSION=2.8.0\nCUDA_VERSION=12.8",
        "torch": "2.8.0",
    }
    new = {
        **old,
        "row": "2.9-cu128",
        "tags": "2.9.1-cuda12.8-runtime,latest-runtime",
        "build_args": "TORCH_VERSION=2.9.1\nCUDA_VERSION=12.8",
    }
    (tmp_path / "m.json").write_text(json.dumps({"include": [old, new]}))
    got = outputs(script("matrix_entry.py", "pick", str(tmp_path / "m.json")).stdout)
    assert got == {
        "row": "2.9-cu128",
        "target": "runtime",
        "tags": "2.9.1-cuda12.8-runtime,latest-runtime",
        "build_args": "TORCH_VERSION=2.9.1\nCUDA_VERSION=12.8",
    }
    (tmp_path / "m.json").write_text(json.dumps({"include": [old]}))
    assert outputs(script("matrix_entry.py", "pick", str(tmp_path / "m.json")).stdout)["row"] == "2.8-cu128"


@pytest.mark.parametrize("text", ["", "{}", '{"include": []}', "not json"])
def test_pick_rejects_a_document_without_entries(tmp_path: Path, text: str) -> None:
    (tmp_path / "m.json").write_text(text)
    proc = script("matrix_entry.py", "pick", str(tmp_path / "m.json"))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and proc.stdout == ""


def report(*statuses: str, exit_code: int | None = None) -> dict:
    """An envcheck JSON report (schema_version 1, as documented in the brief)."""
    results = [
        {
            "name": f"cuda.check{i}",
            "status": s,
            "summary": "",
            "measured": {},
            "expected": {},
            "remediation": None,
            "reason": None,
            "details": None,
            "duration_s": 0.1,
        }
        for i, s in enumerate(statuses)
    ]
    code = exit_code if exit_code is not None else int(any(s in ("fail", "error") for s in statuses))
    return {
        "schema_version": 1,
        "envcheck_version": "0.1.0",
        "context": {"level": "full"},
        "results": results,
        "facts": {},
        "exit_code": code,
    }


def aggregate(rep: dict | None, image: str = REF, error: str | None = None) -> dict:
    """`envcheck image verify --json` output for one image (shape of envcheck.images.verify.aggregate_json)."""
    code = 1 if rep is None or error else rep["exit_code"]
    return {
        "schema_version": 1,
        "exit_code": code,
        "images": [
            {
                "image": image,
                "error": error,
                "container_exit_code": code,
                "duration_s": 1.0,
                "exit_code": code,
                "report": rep,
            }
        ],
    }


def build(
    tmp_path: Path, rep: dict | None, gpus: str | None = NVIDIA_SMI, ref: str = REF, wrap: bool = True
) -> tuple[int, Path]:
    args = ["build", "--ref", ref, "--out", str(tmp_path / "predicate.json")]
    if rep is not None:
        (tmp_path / "gpu.json").write_text(
            json.dumps(aggregate(rep, ref) if wrap and "images" not in rep else rep)
        )
        args += ["--report", str(tmp_path / "gpu.json")]
    if gpus is not None:
        (tmp_path / "smi.csv").write_text(gpus)
        args += ["--gpus", str(tmp_path / "smi.csv")]
    env = {"PATH": "/usr/bin:/bin", "RUNNER_NAME": "gpu-box-1", "GITHUB_RUN_ID": "42", "GITHUB_SHA": "f" * 40}
    return script("verification_predicate.py", *args, env=env).returncode, tmp_path / "predicate.json"


def check(predicate: Path, ref: str = REF) -> subprocess.CompletedProcess[str]:
    return script("verification_predicate.py", "check", "--ref", ref, str(predicate))


def test_a_passing_report_becomes_evidence_that_passes_the_gate(tmp_path: Path) -> None:
    code, path = build(tmp_path, report("pass", "pass", "skip", "warn"))
    predicate = json.loads(path.read_text())
    assert code == 0 and predicate["passed"] is True and predicate["digest"] == "sha256:" + "ab" * 32
    assert predicate["gpus"] == [
        {
            "index": "0",
            "name": "NVIDIA H100 80GB HBM3",
            "driver_version": "570.124.06",
            "memory.total": "81559 MiB",
        }
    ]
    assert predicate["runner"]["name"] == "gpu-box-1" and predicate["run"]["run_id"] == "42"
    assert predicate["report"]["results"][0]["name"] == "cuda.check0"
    proc = check(path)
    assert proc.returncode == 0, proc.stderr
    summary = script("verification_predicate.py", "summary", str(path)).stdout
    assert "PASS" in summary and "NVIDIA H100 80GB HBM3, driver 570.124.06" in summary


@pytest.mark.parametrize(
    ("rep", "gpus", "ref", "why"),
    [
        (report("pass", "fail"), NVIDIA_SMI, REF, "did not pass"),
        (report("pass", "error"), NVIDIA_SMI, REF, "did not pass"),
        (report("pass", exit_code=1), NVIDIA_SMI, REF, "did not pass"),
        (report(), NVIDIA_SMI, REF, "did not pass"),
        (aggregate(None, error="container exited 137 (killed)"), NVIDIA_SMI, REF, "container exited 137"),
        (
            aggregate(report("pass"), image="ghcr.io/acme/other@sha256:" + "ef" * 32),
            NVIDIA_SMI,
            REF,
            "0 entries",
        ),
        (None, NVIDIA_SMI, REF, "wrote no report"),
        (report("pass"), None, REF, "names no GPU"),
        (report("pass"), NVIDIA_SMI, REF.replace("ab", "cd"), "not the staged"),
    ],
    ids=[
        "fail",
        "error",
        "exit-code",
        "no-results",
        "container-error",
        "other-image",
        "no-report",
        "no-gpu",
        "other-digest",
    ],
)
def test_the_gate_refuses_anything_but_a_pass_for_this_digest(tmp_path: Path, rep, gpus, ref, why) -> None:
    code, path = build(tmp_path, rep, gpus, ref)
    assert code == 0, "evidence is recorded even for a failure"
    proc = check(path)
    assert proc.returncode == 1 and why in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


def test_build_refuses_a_reference_not_pinned_by_digest(tmp_path: Path) -> None:
    code, path = build(tmp_path, report("pass"), ref="ghcr.io/acme/envcheck:staging-x-runtime")
    assert code == 2 and not path.exists()


def test_a_plain_run_report_is_accepted_too(tmp_path: Path) -> None:
    code, path = build(tmp_path, report("pass"), wrap=False)
    assert code == 0 and check(path).returncode == 0


@pytest.mark.parametrize(
    ("status", "passes"), [("pass", True), ("warn", True), ("fail", False), ("error", False)]
)
def test_the_real_image_verify_json_is_understood(tmp_path: Path, status: str, passes: bool) -> None:
    """Feed the document envcheck.images.verify.aggregate_json really writes."""
    from envcheck.core.result import Result, Status
    from envcheck.core.run_report import RunReport
    from envcheck.images.docker_run import ImageRun
    from envcheck.images.verify import aggregate_json

    result = Result(
        status=Status(status),
        summary="s",
        name="cuda.available",
        remediation=None if status == "pass" else "fix it",
        reason="crashed" if status == "error" else None,
    )
    doc = json.loads(aggregate_json([ImageRun(image=REF, report=RunReport(results=[result]), exit_code=0)]))
    code, path = build(tmp_path, doc)
    assert code == 0 and (check(path).returncode == 0) is passes, check(path).stderr
    assert json.loads(path.read_text())["report"]["results"][0]["name"] == "cuda.available"


def test_predicate_is_the_in_toto_test_result_with_our_facts_as_extra_fields(tmp_path: Path) -> None:
    rep = report("pass", "pass", "skip", "warn")
    (tmp_path / "gpu.json").write_text(json.dumps(aggregate(rep)))
    (tmp_path / "smi.csv").write_text(NVIDIA_SMI)
    env = {
        "PATH": "/usr/bin:/bin",
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_REPOSITORY": "acme/envcheck",
        "GITHUB_RUN_ID": "42",
        "GITHUB_RUN_ATTEMPT": "2",
        "GITHUB_SHA": "f" * 40,
        "GITHUB_WORKFLOW_REF": "acme/envcheck/.github/workflows/images.yml@refs/heads/main",
    }
    out = tmp_path / "p.json"
    done = script(
        "verification_predicate.py",
        "build",
        "--ref",
        REF,
        "--report",
        str(tmp_path / "gpu.json"),
        "--gpus",
        str(tmp_path / "smi.csv"),
        "--out",
        str(out),
        env=env,
    )
    assert done.returncode == 0, done.stderr
    p = json.loads(out.read_text())
    assert p["result"] == "WARNED"  # passed, with a warning: in-toto's WARNED
    assert p["passedTests"] == ["cuda.check0", "cuda.check1"] and p["warnedTests"] == ["cuda.check3"]
    assert p["failedTests"] == [] and p["skippedTests"] == ["cuda.check2"]
    assert p["url"] == "https://github.com/acme/envcheck/actions/runs/42/attempts/2"
    assert p["configuration"][0] == {
        "name": "acme/envcheck/.github/workflows/images.yml@refs/heads/main",
        "uri": f"https://github.com/acme/envcheck/blob/{'f' * 40}/.github/workflows/images.yml",
        "digest": {"gitCommit": "f" * 40},
    }
    assert p["passed"] is True and p["gpus"] and p["report"]  # our facts stay, as extra fields
    assert check(out).returncode == 0


@pytest.mark.parametrize(
    "statuses, failed", [(("pass", "fail"), ["cuda.check1"]), (("error", "pass"), ["cuda.check0"])]
)
def test_failed_and_errored_checks_are_failed_tests(
    tmp_path: Path, statuses: tuple[str, ...], failed: list[str]
) -> None:
    code, path = build(tmp_path, report(*statuses))
    p = json.loads(path.read_text())
    assert code == 0 and p["result"] == "FAILED" and p["failedTests"] == failed
    assert check(path).returncode == 1


def test_attestation_type_is_the_in_toto_test_result_predicate() -> None:
    workflow = (ROOT / ".github/workflows/images.yml").read_text()
    assert "PREDICATE_TYPE: https://in-toto.io/attestation/test-result/v0.1" in workflow


def test_documented_cosign_identity_is_anchored_to_the_default_branch_or_a_tag() -> None:
    docs = (ROOT / "docs/publishing.md").read_text()
    ids = [line for line in docs.splitlines() if line.startswith("ID=")]
    assert ids, "docs/publishing.md defines no ID= for cosign verify"
    import re

    for line in ids:
        pattern = line.split("=", 1)[1].strip("'\"")
        assert pattern.startswith("^") and pattern.endswith("$"), line
        good = "https://github.com/<owner>/<repo>/.github/workflows/images.yml@"
        assert re.match(pattern, good + "refs/heads/main") and re.match(pattern, good + "refs/tags/v1.2.0")
        assert not re.match(pattern, good + "refs/heads/evil-branch")
        assert not re.match(pattern, good + "refs/pull/7/merge")
    assert "test-result/v0.1" in docs
