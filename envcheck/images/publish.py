"""The one publish path: stage (push, record the digest), verify (envcheck inside that digest), promote (point
every public tag at the verified digest by copying its manifest registry-side; never a rebuild or a re-push)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from envcheck.core.errors import FatalError
from envcheck.images import provenance, skopeo
from envcheck.images import publish_state as records
from envcheck.images.docker_run import ImageRun, RunOptions, run_in_image
from envcheck.images.engine import connect, docker_binary
from envcheck.images.publish_plan import PublishPlan
from envcheck.images.publish_state import REFUSED, VERIFIED, Staged, load_staged, read_json
from envcheck.images.skopeo import REGISTRY_FAILED

_PUSHED_DIGEST = re.compile(r"digest: (sha256:[0-9a-f]{64})")


def docker(args: list[str], what: str, timeout_s: float = 3600.0) -> str:
    """Run the docker CLI; stdout, or one line (exit 4) with its last error line."""
    try:
        done = subprocess.run(
            [docker_binary(), *args], capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        raise FatalError(f"{what}: docker gave no answer in {timeout_s:g}s", REGISTRY_FAILED) from None
    if done.returncode != 0:
        raise FatalError(f"{what}: {skopeo.last_line(done.stderr)}", REGISTRY_FAILED)
    return done.stdout


def stage(plan: PublishPlan, state: Path) -> Staged:
    """Push the local image under the staging tag only; record the digest the registry answered with."""
    docker(
        ["image", "inspect", "--format", "{{.Id}}", plan.local_image],
        f"local image {plan.local_image} not found; build it (make image ROW={plan.row} TARGET={plan.target})",
    )
    docker(["tag", plan.local_image, plan.staging_ref], f"tagging {plan.local_image}")
    try:
        out = docker(
            ["push", plan.staging_ref], f"pushing {plan.staging_ref} failed, no public tag was touched"
        )
    finally:
        subprocess.run(
            [docker_binary(), "image", "rm", plan.staging_ref], capture_output=True, timeout=120, check=False
        )
    pushed = _PUSHED_DIGEST.findall(out)
    if not pushed:
        raise FatalError(
            f"docker push {plan.staging_ref} printed no digest; nothing recorded", REGISTRY_FAILED
        )
    answered = skopeo.digest_of(plan.staging_ref)
    if answered != pushed[-1]:
        raise FatalError(
            f"{plan.staging_ref} resolves to {answered}, not the pushed {pushed[-1]}: someone pushed "
            "over the staging tag; stage again",
            REFUSED,
        )
    staged = Staged.from_plan(plan, pushed[-1])
    records.save_staged(state, staged)
    return staged


def verify(state: Path, options: RunOptions) -> tuple[ImageRun, dict[str, object]]:
    """Pull the staged digest itself and run envcheck inside it; write verified.json (an in-toto Statement)."""
    staged = load_staged(state)
    had_it = (
        subprocess.run(
            [docker_binary(), "image", "inspect", staged.ref], capture_output=True, timeout=60, check=False
        ).returncode
        == 0
    )
    docker(["pull", staged.ref], f"pulling {staged.ref}", timeout_s=3600)
    client = connect()
    try:
        run = run_in_image(client, staged.ref, options)
    finally:
        client.close()
        if not had_it:  # leave the engine as it was: the pulled digest goes again
            subprocess.run(
                [docker_binary(), "image", "rm", staged.ref], capture_output=True, timeout=120, check=False
            )
    statuses = {r.name: r.status.value for r in run.report.results} if run.report and not run.error else {}
    predicate = {
        **provenance.test_result(statuses),
        "configuration": [],
        "url": provenance.run_url(provenance.github_env()),
    }
    doc = provenance.statement(staged.repository, staged.digest, predicate)
    records.write_json(state / VERIFIED, doc)
    return run, doc


def check_gate(state: Path) -> Staged:
    """Refuse (exit 1) unless verified.json passes for exactly the staged digest and the staging tag still
    points at it (an image changed after verification is refused)."""
    staged = load_staged(state)
    try:
        doc = read_json(state / VERIFIED, "run `make publish-verify` (envcheck image publish verify) first")
    except FatalError as exc:
        raise FatalError(
            f"refusing to promote {staged.ref}: it was never verified ({exc.message})", REFUSED
        ) from None
    verified = provenance.subject_digest(doc)
    if verified != staged.digest or doc.get("predicateType") != provenance.TEST_RESULT:
        raise FatalError(
            f"refusing to promote {staged.ref}: the verification record is for {verified}, not this "
            "digest (it was never verified)",
            REFUSED,
        )
    result = (doc.get("predicate") or {}).get("result")
    if result not in provenance.PASSING:
        failed = ", ".join((doc.get("predicate") or {}).get("failedTests") or []) or "no report"
        raise FatalError(f"refusing to promote {staged.ref}: its verification {result} ({failed})", REFUSED)
    now = skopeo.digest_of(f"{staged.repository}:{staged.staging_tag}")
    if now != staged.digest:
        raise FatalError(
            f"refusing to promote {staged.ref}: {staged.staging_tag} now points at {now}, not the "
            "verified digest (the image changed after verification); stage and verify again",
            REFUSED,
        )
    return staged


def promote(
    state: Path,
    *,
    sign_by: str | None = None,
    registries_d: Path | None = None,
    attest_key: Path | None = None,
) -> list[str]:
    """Gate, then (optionally) attach the signed Statement and point every public tag at the verified digest.
    A copy that fails puts the tags already moved back where they were (one line names what is left)."""
    staged = check_gate(state)
    if attest_key is not None:
        envelope = provenance.sign_envelope(read_json(state / VERIFIED, "verify again"), attest_key)
        records.write_json(state / "attestation.dsse.json", envelope)
        provenance.attach(staged.repository, staged.digest, envelope)
    moved: list[tuple[str, str | None]] = []
    for tag in staged.public_tags:
        dest = f"{staged.repository}:{tag}"
        try:
            before = skopeo.digest_of(dest)
            skopeo.copy_manifest(staged.ref, dest, sign_by=sign_by, registries_d=registries_d)
            moved.append((dest, before))
            if skopeo.digest_of(dest) != staged.digest:
                raise FatalError(
                    f"{dest} does not resolve to {staged.digest} after the copy", REGISTRY_FAILED
                )
        except FatalError as exc:
            raise FatalError(
                f"promoting {staged.ref} stopped at {dest}: {exc.message}; {_roll_back(moved)}",
                REGISTRY_FAILED,
            ) from None
    return [f"{staged.repository}:{tag}" for tag in staged.public_tags]


def _roll_back(moved: list[tuple[str, str | None]]) -> str:
    """Point each moved tag back at its old digest; say what could not be put back."""
    left: list[str] = []
    for dest, before in reversed(moved):
        try:
            if before is None:
                left.append(f"{dest} (new)")
            else:
                skopeo.copy_manifest(f"{dest.rsplit(':', 1)[0]}@{before}", dest)
        except FatalError:
            left.append(dest)
    return f"left moved: {', '.join(left)}" if left else "no public tag was left moved"
