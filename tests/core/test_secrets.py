"""One redaction rule for every env var envcheck reports (facts, runtime env, bundles)."""

from __future__ import annotations

import pytest

from envcheck.evidence import bundle
from envcheck.probe import facts

ENV = {
    "NVIDIA_MIRROR": "https://alice:s3cr3t@mirror.example/nvidia",  # allowlisted prefix, a URL with a password
    "NCCL_DEBUG_FILE": "ftp://bob@host/x",
    "NCCL_IB_AUTH_MODE": "s3cr3t",  # AUTH in the name
    "TORCH_CREDS": "s3cr3t",  # CRED in the name
    "LD_LIBRARY_PATH": "/usr/lib",
    "CUDA_VISIBLE_DEVICES": "0",
    "HOME": "/root",
}


@pytest.mark.parametrize(
    "redact",
    [facts.redact_env, facts.runtime_env, bundle.redact_env],
    ids=["facts.env", "facts.runtime_env", "bundle.env"],
)
def test_every_reported_env_redacts_urls_and_auth_cred_names(redact: object) -> None:
    out = redact(ENV)  # type: ignore[operator]
    assert out, "nothing reported"
    assert "s3cr3t" not in repr(out) and "bob@" not in repr(out)
    assert "HOME" not in out
    if "NVIDIA_MIRROR" in out:
        assert out["NVIDIA_MIRROR"] == "https://<redacted>@mirror.example/nvidia"  # the host stays readable
    for name in ("NCCL_IB_AUTH_MODE", "TORCH_CREDS"):
        if name in out:
            assert out[name] == "<redacted>"
    if "LD_LIBRARY_PATH" in out:
        assert out["LD_LIBRARY_PATH"] == "/usr/lib"


def test_facts_env_covers_the_cases() -> None:
    out = facts.redact_env(ENV)
    assert {"NVIDIA_MIRROR", "NCCL_IB_AUTH_MODE", "TORCH_CREDS"} <= set(out)  # the test above is not vacuous
