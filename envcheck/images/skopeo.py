"""Registry reads and registry-side copies through skopeo (it reads `docker login` credentials itself)."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from envcheck.core.errors import ExitCode, FatalError

REGISTRY_FAILED = 4  # exit code: the registry or the transport failed (not a verdict on the image)
_LOOPBACK = ("127.", "localhost", "[::1]")
_LOGRUS_MSG = re.compile(r'msg="(.*)"\s*$')
_MISSING = ("manifest unknown", "not found", "name unknown")


def skopeo_binary() -> str:
    """skopeo on PATH, or a one-line error naming the package."""
    found = shutil.which("skopeo")
    if not found:
        raise FatalError(
            "skopeo is not installed; `apt-get install skopeo` (it copies manifests registry-side)",
            ExitCode.USAGE,
        )
    return found


def is_loopback(ref: str) -> bool:
    """A registry on this machine: plain HTTP, as Docker itself allows for 127.0.0.0/8."""
    return ref.startswith(_LOOPBACK)


def run_skopeo(args: Sequence[str], *, timeout_s: float = 600.0, what: str) -> str:
    """Run skopeo; stdout, or a FatalError (exit 4) with skopeo's last line and `what` it was doing."""
    cmd = [skopeo_binary(), *args]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise FatalError(
            f"{what}: skopeo gave no answer in {timeout_s:g}s; is the registry up?", REGISTRY_FAILED
        ) from None
    if done.returncode != 0:
        raise FatalError(f"{what}: {last_line(done.stderr)}", REGISTRY_FAILED)
    return done.stdout


def last_line(text: str) -> str:
    """The last non-empty line of a tool's stderr (its logrus `msg="..."` when it has one), printable only."""
    lines = [line.strip() for line in text.splitlines() if line.strip()] or ["no output"]
    found = _LOGRUS_MSG.search(lines[-1])
    line = found.group(1).replace('\\"', '"') if found else lines[-1]
    return "".join(ch if ch.isprintable() else "?" for ch in line)[:400]


def tls_flags(ref: str, *names: str) -> list[str]:
    """`--<name>-tls-verify=false` for a loopback registry, nothing otherwise."""
    return [f"--{name}=false" for name in names] if is_loopback(ref) else []


def raw_manifest(ref: str) -> bytes | None:
    """The manifest bytes `ref` (name:tag or name@digest) resolves to; None when the tag does not exist."""
    cmd = [skopeo_binary(), "inspect", "--raw", *tls_flags(ref, "tls-verify"), f"docker://{ref}"]
    try:
        done = subprocess.run(cmd, capture_output=True, timeout=120, check=False)
    except subprocess.TimeoutExpired:
        raise FatalError(
            f"reading {ref}: skopeo gave no answer in 120s; is the registry up?", REGISTRY_FAILED
        ) from None
    if done.returncode != 0:
        err = done.stderr.decode("utf-8", errors="replace")
        if any(marker in err.lower() for marker in _MISSING):
            return None
        raise FatalError(f"reading {ref}: {last_line(err)}", REGISTRY_FAILED)
    return done.stdout


def digest_of(ref: str) -> str | None:
    """sha256 of the manifest `ref` resolves to (what the registry calls its digest); None if absent."""
    raw = raw_manifest(ref)
    return None if raw is None else "sha256:" + hashlib.sha256(raw).hexdigest()


def copy_manifest(
    source: str, dest: str, *, sign_by: str | None = None, registries_d: Path | None = None
) -> None:
    """Copy `source` to `dest` without changing a byte of the manifest (skopeo --preserve-digests), optionally
    GPG-signing it (simple signing; the signature goes where `registries_d` says)."""
    args = [
        "copy",
        "--preserve-digests",
        "--all",
        *tls_flags(source, "src-tls-verify"),
        *tls_flags(dest, "dest-tls-verify"),
    ]
    if sign_by:
        args += ["--sign-by", sign_by]
    if registries_d:
        args = ["--registries.d", str(registries_d), *args]
    run_skopeo([*args, f"docker://{source}", f"docker://{dest}"], what=f"copying {source} to {dest}")


def push_layout(layout: Path, dest: str) -> None:
    """Push an OCI image layout (one manifest) to `dest` unchanged."""
    run_skopeo(
        [
            "copy",
            "--preserve-digests",
            *tls_flags(dest, "dest-tls-verify"),
            f"oci:{layout}",
            f"docker://{dest}",
        ],
        what=f"pushing {layout} to {dest}",
    )


def check_policy(ref: str, policy: Path, registries_d: Path | None = None) -> None:
    """Raise (exit 1) unless `ref` passes the containers-policy.json `policy` (e.g. a signedBy rule); skopeo
    evaluates it while reading the image, so the image is copied to a temporary folder and dropped."""
    args = ["--policy", str(policy), *(["--registries.d", str(registries_d)] if registries_d else [])]
    with tempfile.TemporaryDirectory(prefix="envcheck-policy-") as tmp:
        try:
            run_skopeo(
                [*args, "copy", *tls_flags(ref, "src-tls-verify"), f"docker://{ref}", f"dir:{tmp}/image"],
                what=f"{ref} is refused by {policy}",
            )
        except FatalError as exc:
            raise FatalError(exc.message, ExitCode.FAILED) from None
