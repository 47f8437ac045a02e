"""The one publish path against a real registry (Debian's docker-registry on a random 127.0.0.1 port): stage,
verify by digest, promote by registry-side manifest copy, and every refusal (one line, non-zero, no traceback)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from envcheck.images.engine import find_docker
from envcheck.images.matrix import default_matrix_path, load_matrix
from tests.helpers import run_cli
from tests.helpers.containers import TEST_ROW
from tests.images.publish_fixtures import standins  # noqa: F401  (module fixture)
from tests.images.registry_helpers import CuttingProxy, running_registry, tag_digest

pytestmark = [pytest.mark.docker]
DAY = "20250101"


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_registry(tmp_path_factory.mktemp("registry")) as address:
        yield address


def public_tags() -> list[str]:
    """What envcheck's tag rules give the CI row's runtime target, plus the dated copy of the full tag."""
    tags = load_matrix(default_matrix_path()).row(TEST_ROW).tags("runtime")
    return [*tags, f"{tags[0]}-{DAY}"]


def publish(step: str, state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # A step's own limit, not a speed target: staging the several-GB runtime image compresses and pushes every layer,
    # which took 250 to 300 s on 2 busy cores (a small image takes seconds).
    return run_cli("image", "publish", step, "--state", str(state), *args, timeout=900)


def stage(state: Path, repository: str, image: str) -> subprocess.CompletedProcess[str]:
    return publish(
        "stage", state, "--row", TEST_ROW, "--registry", repository, "--local", image, "--date", DAY
    )


def verify(state: Path) -> subprocess.CompletedProcess[str]:
    return publish("verify", state, "--allow-cpu", "--json", str(state / "report.json"))


def staged_digest(state: Path) -> str:
    return str(json.loads((state / "staged.json").read_text())["digest"])


def full_publish(state: Path, repository: str, image: str) -> str:
    for done in (stage(state, repository, image), verify(state), publish("promote", state)):
        assert done.returncode == 0, done.stdout + done.stderr
    return staged_digest(state)


def assert_refused(done: subprocess.CompletedProcess[str], code: int, *words: str) -> None:
    """One line naming the cause, the given non-zero exit, no traceback."""
    err = done.stderr.strip()
    assert done.returncode == code, (done.returncode, done.stdout, err)
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    for word in words:
        assert word in err, err


def tags_of(registry: str, name: str) -> dict[str, str | None]:
    return {tag: tag_digest(registry, name, tag) for tag in public_tags()}


def test_publish_pushes_verifies_by_digest_and_points_every_tag_at_it(
    registry: str,
    standins: dict[str, str],  # noqa: F811
    tmp_path: Path,
) -> None:
    digest = full_publish(tmp_path, f"{registry}/t/ok", standins["pass-a"])
    assert tag_digest(registry, "t/ok", f"staging-{TEST_ROW}-runtime") == digest
    assert tags_of(registry, "t/ok") == dict.fromkeys(public_tags(), digest)
    # verify pulled the digest itself and ran envcheck inside it (the stand-in's real report came back), then
    # removed what it pulled
    docker = find_docker() or "docker"
    pulled = subprocess.run(
        [docker, "image", "inspect", f"{registry}/t/ok@{digest}"],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert pulled.returncode != 0, "verify left the pulled digest in the engine"
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["images"][0]["image"] == f"{registry}/t/ok@{digest}" and report["exit_code"] == 0
    statement = json.loads((tmp_path / "verified.json").read_text())
    assert statement["subject"][0]["digest"] == {"sha256": digest.split(":")[1]}
    assert statement["predicate"]["result"] == "PASSED"


def test_an_unverified_digest_is_never_promoted(
    registry: str,
    standins: dict[str, str],  # noqa: F811
    tmp_path: Path,
) -> None:
    assert stage(tmp_path, f"{registry}/t/unverified", standins["pass-a"]).returncode == 0
    assert_refused(publish("promote", tmp_path), 1, "never verified", "publish-verify")
    # a verification record for another digest does not count either
    other = tmp_path / "other"
    assert stage(other, f"{registry}/t/unverified", standins["pass-b"]).returncode == 0
    assert verify(other).returncode == 0
    (tmp_path / "verified.json").write_text((other / "verified.json").read_text())
    assert_refused(publish("promote", tmp_path), 1, "refusing to promote", "never verified")
    assert set(tags_of(registry, "t/unverified").values()) == {None}


def test_a_failed_verification_is_not_promoted(
    registry: str,
    standins: dict[str, str],  # noqa: F811
    tmp_path: Path,
) -> None:
    first = full_publish(tmp_path / "a", f"{registry}/t/failed", standins["pass-a"])
    assert stage(tmp_path / "b", f"{registry}/t/failed", standins["fail"]).returncode == 0
    assert verify(tmp_path / "b").returncode == 1
    assert_refused(publish("promote", tmp_path / "b"), 1, "FAILED", "net.ifname")
    assert set(tags_of(registry, "t/failed").values()) == {first}


def test_an_image_changed_after_verification_is_refused(
    registry: str,
    standins: dict[str, str],  # noqa: F811
    tmp_path: Path,
) -> None:
    first = full_publish(tmp_path / "a", f"{registry}/t/moved", standins["pass-a"])
    state = tmp_path / "b"
    assert stage(state, f"{registry}/t/moved", standins["pass-b"]).returncode == 0
    assert verify(state).returncode == 0
    # someone pushes another image over the staging tag between verify and promote
    assert stage(tmp_path / "c", f"{registry}/t/moved", standins["pass-c"]).returncode == 0
    assert_refused(publish("promote", state), 1, "changed after verification", staged_digest(state))
    assert set(tags_of(registry, "t/moved").values()) == {first}


def test_a_registry_failing_mid_push_moves_no_public_tag(
    registry: str,
    standins: dict[str, str],  # noqa: F811
    tmp_path: Path,
) -> None:
    first = full_publish(tmp_path / "a", f"{registry}/t/cut", standins["pass-a"])
    proxy = CuttingProxy(registry)
    try:
        done = stage(tmp_path / "b", f"{proxy.address}/t/cut", standins["pass-b"])
    finally:
        proxy.close()
    assert proxy.cuts >= 1, "the proxy never saw the manifest upload"
    assert_refused(done, 4, "no public tag was touched")
    assert not (tmp_path / "b" / "staged.json").exists()
    assert set(tags_of(registry, "t/cut").values()) == {first}
    assert tag_digest(registry, "t/cut", f"staging-{TEST_ROW}-runtime") == first


def test_dry_run_touches_nothing(registry: str, tmp_path: Path) -> None:
    done = run_cli(
        "image",
        "publish",
        "plan",
        "--row",
        TEST_ROW,
        "--registry",
        f"{registry}/t/dry",
        "--date",
        DAY,
        "--state",
        str(tmp_path / "state"),
    )
    assert done.returncode == 0, done.stderr
    for tag in public_tags():
        assert f"{registry}/t/dry:{tag}" in done.stdout
    assert not (tmp_path / "state").exists() and set(tags_of(registry, "t/dry").values()) == {None}
