"""The verification result as an in-toto Statement (test-result predicate) in a DSSE envelope, attached to the
image by digest under cosign's `sha256-<hex>.att` tag (a registry without the OCI referrers API)."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from envcheck.core.errors import ExitCode, FatalError, UsageError
from envcheck.images import skopeo

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
TEST_RESULT = "https://in-toto.io/attestation/test-result/v0.1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
DSSE_MEDIA_TYPE = "application/vnd.dsse.envelope.v1+json"
PASSING = ("PASSED", "WARNED")


def test_result(statuses: dict[str, str]) -> dict[str, Any]:
    """The test-result predicate from check name -> status (error counts as failed, skip is left out)."""
    by: dict[str, list[str]] = {"pass": [], "warn": [], "fail": []}
    for name, status in statuses.items():
        if status != "skip":
            by[status if status in by else "fail"].append(name)
    result = "FAILED" if by["fail"] or not statuses else "WARNED" if by["warn"] else "PASSED"
    return {"result": result, "passedTests": by["pass"], "warnedTests": by["warn"], "failedTests": by["fail"]}


def statement(repository: str, digest: str, predicate: dict[str, Any]) -> dict[str, Any]:
    """An in-toto v1 Statement whose one subject is the image digest."""
    algorithm, _, hexdigest = digest.partition(":")
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": repository, "digest": {algorithm: hexdigest}}],
        "predicateType": TEST_RESULT,
        "predicate": predicate,
    }


def run_url(env: dict[str, str]) -> str:
    """The GitHub Actions run that verified, when there is one; '' elsewhere."""
    repo, run_id = env.get("GITHUB_REPOSITORY"), env.get("GITHUB_RUN_ID")
    server = env.get("GITHUB_SERVER_URL", "https://github.com")
    return f"{server}/{repo}/actions/runs/{run_id}" if repo and run_id else ""


def subject_digest(doc: dict[str, Any]) -> str | None:
    """`sha256:<hex>` of a Statement's single subject, or None when it has not exactly one sha256 subject."""
    subjects = doc.get("subject") if isinstance(doc, dict) else None
    if not isinstance(subjects, list) or len(subjects) != 1:
        return None
    hexdigest = (subjects[0].get("digest") or {}).get("sha256") if isinstance(subjects[0], dict) else None
    return f"sha256:{hexdigest}" if isinstance(hexdigest, str) else None


def sign_envelope(doc: dict[str, Any], key_path: Path) -> dict[str, Any]:
    """A DSSE envelope of the Statement, signed with the PEM private key at `key_path` (securesystemslib)."""
    try:
        from cryptography.hazmat.primitives.serialization import load_pem_private_key
        from securesystemslib.dsse import Envelope
        from securesystemslib.signer import CryptoSigner  # type: ignore[attr-defined]
    except ImportError:
        raise FatalError(
            "signing the attestation needs securesystemslib; `pip install 'securesystemslib[crypto]'`",
            ExitCode.USAGE,
        ) from None
    try:
        private = load_pem_private_key(key_path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as exc:
        raise UsageError(
            f"--attest-key {key_path}: not a readable unencrypted PEM private key ({exc})"
        ) from None
    envelope = Envelope(
        payload=json.dumps(doc, sort_keys=True).encode(), payload_type=PAYLOAD_TYPE, signatures={}
    )
    envelope.sign(CryptoSigner(private))
    signed: dict[str, Any] = envelope.to_dict()
    return signed


def attestation_tag(digest: str) -> str:
    """cosign's tag for a digest's attestations: `sha256-<hex>.att`."""
    return digest.replace(":", "-") + ".att"


def attach(repository: str, digest: str, envelope: dict[str, Any]) -> str:
    """Push the envelope as a cosign-style attestation manifest to `repository:sha256-<hex>.att`; its ref."""
    dest = f"{repository}:{attestation_tag(digest)}"
    with tempfile.TemporaryDirectory(prefix="envcheck-att-") as tmp:
        _write_layout(Path(tmp), json.dumps(envelope).encode())
        skopeo.push_layout(Path(tmp), dest)
    return dest


def _write_layout(root: Path, layer: bytes) -> None:
    """An OCI image layout holding one manifest: a minimal config and the DSSE envelope as its one layer."""
    blobs = root / "blobs" / "sha256"
    blobs.mkdir(parents=True)

    def blob(data: bytes) -> dict[str, Any]:
        hexdigest = hashlib.sha256(data).hexdigest()
        (blobs / hexdigest).write_bytes(data)
        return {"size": len(data), "digest": f"sha256:{hexdigest}"}

    layer_desc = {"mediaType": DSSE_MEDIA_TYPE, **blob(layer), "annotations": {"predicateType": TEST_RESULT}}
    config = {
        "architecture": "",
        "os": "",
        "created": "0001-01-01T00:00:00Z",
        "config": {},
        "history": [{"created": "0001-01-01T00:00:00Z"}],
        "rootfs": {"type": "layers", "diff_ids": [layer_desc["digest"]]},
    }
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            **blob(json.dumps(config).encode()),
        },
        "layers": [layer_desc],
    }
    manifest_desc = {"mediaType": manifest["mediaType"], **blob(json.dumps(manifest).encode())}
    (root / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [manifest_desc]}))
    (root / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')


def github_env() -> dict[str, str]:
    """The GitHub Actions variables run_url reads (empty off GitHub)."""
    return {k: v for k, v in os.environ.items() if k.startswith("GITHUB_")}
