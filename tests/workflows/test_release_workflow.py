"""release.yml: the wheel `make dist` builds is installed, tested outside the checkout, and published to PyPI by
trusted publishing only on a v* tag, after the tests; nothing else in it can write anywhere."""

from __future__ import annotations

import pytest

from tests.workflows import gha

RELEASE = "release.yml"


@pytest.fixture(scope="module")
def wf() -> dict:
    return gha.workflow(RELEASE)


def _runs(job: dict) -> str:
    return "\n".join(str(s.get("run", "")) for s in job["steps"])


def test_build_is_the_make_target_a_person_runs(wf: dict) -> None:
    assert "make dist" in _runs(wf["jobs"]["build"])
    upload = next(
        s for s in wf["jobs"]["build"]["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")
    )
    assert upload["with"]["path"] == "dist/"


def test_the_tag_must_be_pyprojects_version(wf: dict) -> None:
    step = next(s for s in wf["jobs"]["build"]["steps"] if "pyproject" in str(s.get("run", "")))
    assert step["if"] == "startsWith(github.ref, 'refs/tags/v')" and '"v$version" = "$TAG"' in step["run"]


def test_the_wheel_is_installed_and_run_outside_the_checkout_on_two_pythons(wf: dict) -> None:
    job = wf["jobs"]["test"]
    assert job["needs"] == "build" and job["strategy"]["matrix"]["python"] == ["3.10", "3.12"]
    assert not any(s.get("uses", "").startswith("actions/checkout@") for s in job["steps"]), (
        "no checkout to lean on"
    )
    runs = _runs(job)
    assert (
        'pip" install dist/torch_envcheck-*.whl' in runs and "pipx install dist/torch_envcheck-*.whl" in runs
    )
    for command in ("--version", "host", "matrix list"):
        assert f'envcheck" {command}' in runs, command
    assert 'cd "$RUNNER_TEMP"' in runs


def test_publish_is_trusted_publishing_on_a_tag_after_the_tests(wf: dict) -> None:
    job = wf["jobs"]["publish"]
    assert job["needs"] == ["build", "test"] and job["if"] == "startsWith(github.ref, 'refs/tags/v')"
    assert job["permissions"] == {"id-token": "write"} and job["environment"]["name"] == "pypi"
    (publish,) = [s for s in job["steps"] if s.get("uses", "").startswith("pypa/gh-action-pypi-publish@")]
    assert "with" not in publish or not {"password", "user"} & set(publish["with"]), "no token: OIDC only"
    assert gha.condition_is_gated(job["if"]) or job["if"].startswith("startsWith(github.ref, 'refs/tags/")


def test_no_other_job_can_write_or_mint_a_token(wf: dict) -> None:
    assert wf["permissions"] == {}
    for name, job in wf["jobs"].items():
        if name != "publish":
            assert set((job.get("permissions") or {}).values()) <= {"read"}, name


def test_it_triggers_on_tags_and_on_package_pull_requests(wf: dict) -> None:
    on = wf[True] if True in wf else wf["on"]
    assert on["push"] == {"tags": ["v*"]}
    assert {"envcheck/**", "pyproject.toml"} <= set(on["pull_request"]["paths"])
