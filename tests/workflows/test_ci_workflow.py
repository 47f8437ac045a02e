"""ci.yml: lint, type-check and CPU tests on every pull request and push, then a real image with envcheck inside."""

from __future__ import annotations

import pytest

from tests.workflows import gha


@pytest.fixture(scope="module")
def wf() -> dict:
    return gha.workflow("ci.yml")


def _runs(job: dict) -> str:
    return "\n".join(str(step.get("run", "")) for step in job["steps"])


def test_runs_on_pull_requests_and_pushes(wf: dict) -> None:
    assert "pull_request" in wf["on"] and "push" in wf["on"]
    assert "pull_request_target" not in wf["on"]


def test_lint_job_runs_ruff_its_formatter_check_and_mypy(wf: dict) -> None:
    runs = _runs(wf["jobs"]["lint"])
    assert "ruff check" in runs and "ruff format --check" in runs and "mypy" in runs


def test_tests_run_on_a_cpu_runner_without_the_docker_tests(wf: dict) -> None:
    job = wf["jobs"]["test"]
    assert job["runs-on"].startswith("ubuntu-")
    runs = _runs(job)
    assert 'pytest -m "not docker"' in runs and "whl/cpu" in runs


def test_docker_job_builds_a_runtime_image_and_runs_envcheck_inside(wf: dict) -> None:
    job = wf["jobs"]["docker"]
    assert job["env"]["ENVCHECK_REQUIRE_DOCKER"] == "1", "docker tests must not skip in CI"
    runs = _runs(job)
    assert (
        "matrix github" in runs and "envcheck image verify --allow-cpu" in runs and "pytest -m docker" in runs
    )
    build = next(s for s in job["steps"] if s.get("uses", "").startswith("docker/build-push-action@"))
    assert build["with"]["load"] is True and build["with"]["push"] is False
    assert build["with"]["target"] == "${{ steps.pick.outputs.target }}"
    pick = next(s for s in job["steps"] if s.get("id") == "pick")
    assert pick["env"]["TARGET"] == "${{ inputs.target || 'runtime' }}", (
        "runtime unless a dispatch says otherwise"
    )


def test_ci_never_writes_to_a_registry() -> None:
    assert not [s.label for s in gha.steps("ci.yml") if gha.publishes(s)]
