"""A diagnosis bundle: what every replayable check reads, captured once, replayable on another machine.

`capture_host()` runs each section's capture (envcheck.checks.check_registry.SECTIONS, CUDA among them); `make_bundle()` adds
the schema header and the facts; `load_bundle()` reads a bundle file back and refuses anything malformed with one
line, each section checking its own shape. `envcheck.evidence.replay` judges it with the sections' pure verdicts.
"""

from __future__ import annotations

import json
import os
import stat
from typing import Any

from envcheck.core import redact
from envcheck.core.check import CheckSpec, Context
from envcheck.core.errors import UsageError
from envcheck.core.result import Result, passed

SCHEMA = "envcheck-bundle"
SCHEMA_VERSION = 1
MAX_BUNDLE_BYTES = 8 * 2**20
ENV_PREFIXES = (
    "NVIDIA_",
    "CUDA_",
    "NCCL_",
    "GLOO_",
    "TORCH_",
    "PYTORCH_",
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "MASTER_ADDR",
    "MASTER_PORT",
    "WORLD_SIZE",
    "ENVCHECK_",
)


def redact_env(environ: dict[str, str]) -> dict[str, str]:
    """The variables the diagnosis reads, secrets redacted by name and in URLs (envcheck.core.redact)."""
    return redact.redact_env(environ, ENV_PREFIXES)


def capture_host() -> dict[str, Any]:
    """The bundle's host part: every replayable section's inputs (envcheck.checks.check_registry.SECTIONS) and the relevant
    env, redacted. A section that cannot be read keeps its error; the rest of the bundle is not lost."""
    from envcheck.checks.check_registry import SECTIONS

    host: dict[str, Any] = {"env": redact_env(dict(os.environ))}
    for section in SECTIONS:
        try:
            host[section.key] = section.capture()
        except Exception as exc:
            if section.required:
                raise
            host[section.key] = {"capture_error": f"{type(exc).__name__}: {exc}"}
    return host


def capture_check(ctx: Context) -> Result:
    """Run in an isolated worker by `envcheck facts --bundle`: the captured inputs travel in `measured`."""
    return passed("captured the diagnosis inputs", measured={"bundle": capture_host()})


CAPTURE_SPEC = CheckSpec(
    "bundle.capture", capture_check, "capture what the replayable checks read", timeout_s=60
)


def make_bundle(host: dict[str, Any], facts: dict[str, Any], version: str) -> dict[str, Any]:
    """The bundle document: schema header, the captured host part, and the facts (NVML state among them)."""
    if isinstance(
        facts.get("env"), dict
    ):  # facts' own env list: redact it the bundle's way too (URL user:token@)
        facts = {**facts, "env": redact_env({str(k): str(v) for k, v in facts["env"].items()})}
    # token-shaped values anywhere (a ghp_ folder in LD_LIBRARY_PATH, an hf_ file in LD_PRELOAD) too
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "envcheck_version": version,
        **redact.redact_deep(host),
        "facts": redact.redact_deep(facts),
    }


def validate_bundle(data: Any, where: str = "bundle") -> dict[str, Any]:
    """The bundle if it has the schema's shape; UsageError naming the first thing wrong otherwise."""
    from envcheck.checks.check_registry import SECTIONS

    if not isinstance(data, dict):
        raise UsageError(
            f"{where}: not an envcheck bundle (a JSON object is expected, got {type(data).__name__})"
        )
    if data.get("schema") != SCHEMA:
        raise UsageError(
            f"{where}: not an envcheck bundle (schema is {data.get('schema')!r}, want {SCHEMA!r}; "
            "make one with `envcheck facts --bundle FILE`)"
        )
    if data.get("schema_version") != SCHEMA_VERSION:
        raise UsageError(
            f"{where}: bundle schema_version {data.get('schema_version')!r} is not supported "
            f"(this envcheck reads version {SCHEMA_VERSION})"
        )
    for section in SECTIONS:
        part = data.get(section.key)
        if part is None:
            if section.required:
                raise UsageError(f"{where}: bundle has no {section.key!r} section")
            continue
        if (
            isinstance(part, dict)
            and set(part) == {"capture_error"}
            and isinstance(part["capture_error"], str)
        ):
            continue
        section.validate(part, f"{where}: bundle's {section.key}")
    for key in ("env", "facts"):
        if key in data and not isinstance(data[key], dict):
            raise UsageError(f"{where}: bundle's {key!r} must be an object")
    return data


def load_bundle(path: str) -> dict[str, Any]:
    """Read and validate a bundle file; one-line UsageError for a missing, special, huge or malformed file."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise UsageError(f"cannot read bundle {path}: {exc.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{path} is a directory; give the bundle file that `envcheck facts --bundle` wrote")
    if not stat.S_ISREG(st.st_mode):  # a FIFO or device would block or never end
        raise UsageError(
            f"{path} is not a regular file; give the bundle file that `envcheck facts --bundle` wrote"
        )
    if st.st_size > MAX_BUNDLE_BYTES:
        raise UsageError(
            f"{path} is {st.st_size / 2**20:.1f} MiB; a bundle is at most "
            f"{MAX_BUNDLE_BYTES // 2**20} MiB (is this the right file?)"
        )
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_BUNDLE_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"cannot read bundle {path}: {exc.strerror}") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"{path}: not JSON ({str(exc).splitlines()[0][:120]})") from None
    except RecursionError:
        raise UsageError(f"{path}: not a bundle (JSON nested too deeply)") from None
    return validate_bundle(data, path)
