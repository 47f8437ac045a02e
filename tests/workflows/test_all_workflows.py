"""Rules every workflow and the Dependabot file obey: schemas, zizmor, SHA pins, checkout credentials."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.workflows import gha

TOOLS = Path(sys.executable).parent
DEPENDABOT = gha.ROOT / ".github" / "dependabot.yml"
WORKFLOW_FILES = gha.all_workflow_files()
ALL_STEPS = [step for path in WORKFLOW_FILES for step in gha.steps(path.name)]
UNPINNED = """\
on: pull_request_target
permissions: write-all
jobs:
  x:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
        with: {ref: "${{ github.event.pull_request.head.sha }}"}
      - run: echo "${{ github.event.pull_request.title }}"
"""


def _tool(name: str) -> str:
    path = TOOLS / name
    found = str(path) if path.exists() else shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed; run: pip install '.[test]'")
    return found


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=120, check=False)


def test_there_are_workflows() -> None:
    assert {p.name for p in WORKFLOW_FILES} >= {"ci.yml", "images.yml"}


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_workflow_matches_schema(path: Path) -> None:
    proc = _run(_tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", str(path))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_dependabot_matches_schema_and_covers_actions_docker_pip() -> None:
    proc = _run(_tool("check-jsonschema"), "--builtin-schema", "vendor.dependabot", str(DEPENDABOT))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    updates = {
        (u["package-ecosystem"], u["directory"])
        for u in gha.yaml.safe_load(DEPENDABOT.read_text())["updates"]
    }
    assert updates == {("github-actions", "/"), ("docker", "/docker"), ("pip", "/")}


def test_schema_check_rejects_a_broken_workflow(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text("on: push\njobs:\n  x:\n    steps: [{run: true}]\n")
    assert (
        _run(_tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", str(bad)).returncode
        != 0
    )


def _zizmor_findings(*paths: Path) -> list[dict]:
    proc = _run(
        _tool("zizmor"),
        "--offline",
        "--no-config",
        "--format",
        "json",
        "--min-severity",
        "medium",
        *map(str, paths),
    )
    # Exit codes: 0 clean, 10-14 findings (by highest severity), anything else a tool failure.
    assert proc.returncode in (0, 10, 11, 12, 13, 14), proc.stderr
    findings = json.loads(proc.stdout)
    assert (proc.returncode == 0) == (findings == [])
    return findings


def test_zizmor_offline_has_no_medium_or_higher_findings() -> None:
    findings = _zizmor_findings(*WORKFLOW_FILES, DEPENDABOT)
    assert findings == [], [(f["ident"], f["determinations"]["severity"]) for f in findings]


def test_zizmor_catches_a_vulnerable_workflow(tmp_path: Path) -> None:
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    bad = tmp_path / ".github" / "workflows" / "bad.yml"
    bad.write_text(UNPINNED)
    idents = {f["ident"] for f in _zizmor_findings(bad)}
    assert {"template-injection", "dangerous-triggers", "unpinned-uses"} <= idents, idents


@pytest.mark.parametrize("step", [s for s in ALL_STEPS if "uses" in s.step], ids=lambda s: s.label)
def test_every_action_is_pinned_to_a_full_sha_with_a_version_comment(step: gha.Step) -> None:
    assert gha.SHA_PIN.match(step.step["uses"]), f"{step.label}: {step.step['uses']} is not pinned to a SHA"
    line = next(
        ln
        for ln in (gha.WORKFLOWS / step.workflow).read_text().splitlines()
        if f"uses: {step.step['uses']}" in ln
    )
    assert gha.VERSION_COMMENT.search(line), f"{step.label}: add a `# vX.Y.Z` comment"


def test_the_same_action_is_pinned_to_the_same_sha_everywhere() -> None:
    pins: dict[str, set[str]] = {}
    for step in ALL_STEPS:
        if "uses" in step.step:
            pins.setdefault(step.action, set()).add(step.step["uses"])
    assert {action: refs for action, refs in pins.items() if len(refs) > 1} == {}


@pytest.mark.parametrize(
    "step", [s for s in ALL_STEPS if s.action == "actions/checkout"], ids=lambda s: s.label
)
def test_checkout_does_not_persist_credentials(step: gha.Step) -> None:
    assert step.step.get("with", {}).get("persist-credentials") is False


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_workflow_permissions_and_concurrency(path: Path) -> None:
    wf = gha.load(path)
    assert wf["permissions"] == {}, "top level grants nothing; jobs ask for what they need"
    assert all("permissions" in job for job in wf["jobs"].values())
    assert all("timeout-minutes" in job for job in wf["jobs"].values()), "nothing hangs for 6 hours"
    assert wf["concurrency"]["group"]
    assert "workflow_dispatch" in wf["on"], "every workflow can be run by hand"
    builds_images = any(
        s.get("with", {}).get("file") == "docker/Dockerfile"
        for job in wf["jobs"].values()
        for s in job["steps"]
    )
    if builds_images:  # one row and target at a time, by hand
        dispatch = wf["on"]["workflow_dispatch"]["inputs"]
        assert {"row", "target"} <= dispatch.keys()


def test_jobs_that_build_the_dockerfile_create_the_wheelhouse_it_bind_mounts_first() -> None:
    for path in WORKFLOW_FILES:
        for job_id, job in gha.load(path)["jobs"].items():
            steps = job.get("steps", [])
            builds = [i for i, s in enumerate(steps) if s.get("with", {}).get("file") == "docker/Dockerfile"]
            if builds:
                made = [i for i, s in enumerate(steps) if "mkdir -p .wheelhouse" in str(s.get("run", ""))]
                assert made and made[0] < builds[0], f"{path.name}:{job_id} builds before .wheelhouse exists"
