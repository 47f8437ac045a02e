"""Provenance of a publish, checked with the ecosystem's libraries and tools, not envcheck's code: the DSSE
envelope at cosign's `sha256-<hex>.att` tag verified with in-toto/securesystemslib and its Statement with the
in-toto attestation bindings; skopeo GPG simple signing judged by a containers policy.json `signedBy` rule."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import run_cli
from tests.images.publish_fixtures import standins  # noqa: F401  (module fixture)
from tests.images.registry_helpers import get_blob, get_json, require_tools, running_registry, tag_digest
from tests.images.test_publish_registry import (
    assert_refused,
    public_tags,
    publish,
    stage,
    staged_digest,
    verify,
)

pytestmark = [pytest.mark.docker]


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_registry(tmp_path_factory.mktemp("registry")) as address:
        yield address


def ed25519_pem(path: Path) -> object:
    """A throwaway Ed25519 key as unencrypted PEM; its public key object."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return key.public_key()


def test_the_verification_is_attached_as_a_dsse_signed_in_toto_statement(
    registry: str,
    standins: dict[str, str],  # noqa: F811
    tmp_path: Path,
) -> None:
    from google.protobuf import json_format
    from in_toto.models.metadata import Envelope
    from in_toto_attestation.predicates.test_result.v0 import test_result_pb2
    from in_toto_attestation.v1 import statement_pb2
    from in_toto_attestation.v1.statement import Statement
    from securesystemslib.exceptions import VerificationError
    from securesystemslib.signer import SSlibKey

    public = ed25519_pem(tmp_path / "attest.pem")
    other = ed25519_pem(tmp_path / "other.pem")
    assert stage(tmp_path, f"{registry}/t/att", standins["pass-a"]).returncode == 0
    assert verify(tmp_path).returncode == 0
    done = publish("promote", tmp_path, "--attest-key", str(tmp_path / "attest.pem"))
    assert done.returncode == 0, done.stderr
    digest = staged_digest(tmp_path)
    manifest = get_json(registry, f"t/att/manifests/{digest.replace(':', '-')}.att")
    layer = manifest["layers"][0]
    assert layer["mediaType"] == "application/vnd.dsse.envelope.v1+json"
    envelope = Envelope.from_dict(json.loads(get_blob(registry, "t/att", layer["digest"])))

    envelope.verify([SSlibKey.from_crypto(public)], 1)  # type: ignore[arg-type]
    with pytest.raises(VerificationError):
        envelope.verify([SSlibKey.from_crypto(other)], 1)  # type: ignore[arg-type]
    statement = json_format.ParseDict(json.loads(envelope.payload), statement_pb2.Statement())
    Statement.copy_from_pb(statement).validate()
    assert statement.predicate_type == "https://in-toto.io/attestation/test-result/v0.1"
    assert [dict(s.digest) for s in statement.subject] == [{"sha256": digest.split(":")[1]}]
    result = json_format.ParseDict(json.loads(envelope.payload)["predicate"], test_result_pb2.TestResult())
    assert result.result == "PASSED" and set(result.passed_tests) == {"container.shm", "net.ifname"}
    assert {tag_digest(registry, "t/att", tag) for tag in public_tags()} == {digest}

    tampered = Envelope.from_dict(json.loads(get_blob(registry, "t/att", layer["digest"])))
    tampered.payload = tampered.payload.replace(b"PASSED", b"FAILED")
    with pytest.raises(VerificationError):
        tampered.verify([SSlibKey.from_crypto(public)], 1)  # type: ignore[arg-type]


@pytest.fixture
def gnupg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, str], dict[str, str]]]:
    """A throwaway GNUPGHOME with keys `right` and `wrong` (no passphrase); (env, name -> fingerprint).
    Its gpg-agent is stopped afterwards."""
    require_tools("gpg", "gpgconf", "skopeo")
    home = tmp_path_factory.mktemp("g")
    home.chmod(0o700)
    env = {**os.environ, "GNUPGHOME": str(home)}
    fingerprints = {}
    try:
        for name in ("right", "wrong"):
            uid = f"envcheck publish test {name} <{name}@example.invalid>"
            subprocess.run(
                [
                    "gpg",
                    "--batch",
                    "--pinentry-mode",
                    "loopback",
                    "--passphrase",
                    "",
                    "--quick-gen-key",
                    uid,
                    "ed25519",
                    "sign",
                    "never",
                ],
                env=env,
                capture_output=True,
                timeout=60,
                check=True,
            )
            listing = subprocess.run(
                ["gpg", "--with-colons", "--list-keys", uid],
                env=env,
                capture_output=True,
                text=True,
                timeout=30,
                check=True,
            ).stdout
            fingerprints[name] = next(
                line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr")
            )
        yield env, fingerprints
    finally:
        subprocess.run(["gpgconf", "--kill", "all"], env=env, capture_output=True, timeout=30, check=False)


def test_simple_signing_policy_accepts_the_right_key_and_refuses_unsigned_or_wrongly_signed(
    registry: str,
    standins: dict[str, str],  # noqa: F811
    tmp_path: Path,
    gnupg: tuple[dict[str, str], dict[str, str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env, fpr = gnupg
    monkeypatch.setenv(
        "GNUPGHOME", env["GNUPGHOME"]
    )  # run_cli passes os.environ to envcheck, and so to skopeo
    sigstore, registries_d = tmp_path / "sigstore", tmp_path / "registries.d"
    registries_d.mkdir()
    (registries_d / "default.yaml").write_text(
        f"default-docker:\n  lookaside: file://{sigstore}\n  lookaside-staging: file://{sigstore}\n"
    )
    trusted = tmp_path / "right.gpg"
    trusted.write_bytes(
        subprocess.run(
            ["gpg", "--export", fpr["right"]], env=env, capture_output=True, timeout=30, check=True
        ).stdout
    )
    policy = tmp_path / "policy.json"
    policy.write_text(
        json.dumps(
            {
                "default": [{"type": "reject"}],
                "transports": {
                    "docker": {
                        f"{registry}/t": [{"type": "signedBy", "keyType": "GPGKeys", "keyPath": str(trusted)}]
                    }
                },
            }
        )
    )
    tag = public_tags()[0]
    for name, image, sign in (
        ("right", "pass-a", fpr["right"]),
        ("unsigned", "pass-b", None),
        ("wrong", "pass-c", fpr["wrong"]),
    ):
        state = tmp_path / name
        assert stage(state, f"{registry}/t/{name}", standins[image]).returncode == 0
        assert verify(state).returncode == 0
        extra = ["--sign-by", sign, "--registries-d", str(registries_d)] if sign else []
        done = publish("promote", state, *extra)
        assert done.returncode == 0, done.stderr

    def check(name: str) -> subprocess.CompletedProcess[str]:
        return run_cli(
            "image",
            "publish",
            "check-signature",
            f"{registry}/t/{name}:{tag}",
            "--policy",
            str(policy),
            "--registries-d",
            str(registries_d),
            timeout=120,
        )

    accepted = check("right")
    assert accepted.returncode == 0, accepted.stderr
    assert_refused(check("unsigned"), 1, "refused by", "A signature was required, but no signature exists")
    assert_refused(check("wrong"), 1, "refused by", "Invalid GPG signature")
