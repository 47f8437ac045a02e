"""The one redaction rule for every environment variable envcheck reports (facts, runtime env, bundles; the
report is published inside image attestations): a name that suggests a secret hides its whole value, and any
URL loses its `user:password@` part, whatever the variable."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

REDACTED = "<redacted>"
SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "KEY", "AUTH", "CRED")
_URL_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@")


def is_secret_name(name: str) -> bool:
    """Whether a variable's name suggests it holds a secret (NCCL_IB_AUTH_KEY, HF_TOKEN, PIP_CRED...)."""
    upper = name.upper()
    return any(word in upper for word in SECRET_WORDS)


def redact_value(value: str) -> str:
    """Hide credentials inside URLs (`https://user:token@host` -> `https://<redacted>@host`)."""
    return _URL_USERINFO.sub(rf"\1{REDACTED}@", value)


def redact_env(environ: Mapping[str, str], prefixes: Iterable[str]) -> dict[str, str]:
    """The variables whose names start with one of `prefixes`, sorted, each redacted by name and in URLs."""
    wanted = tuple(prefixes)
    return {name: REDACTED if is_secret_name(name) else redact_value(environ[name])
            for name in sorted(environ) if name.startswith(wanted)}
