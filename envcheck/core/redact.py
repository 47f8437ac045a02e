"""The one redaction rule for everything envcheck reports (facts, runtime env, bundles, reports; the report is
published inside image attestations):
- a variable whose name suggests a secret hides its whole value (the name stays, so the reader sees which one);
- any URL loses its `user:password@` part, whatever the variable;
- a token-shaped value anywhere (a path component, a word in a summary) is replaced, keeping its known prefix so
  the reader sees what kind of token was there: GitHub (ghp_, gho_, ghu_, ghs_, ghr_, github_pat_), Hugging Face
  (hf_), Slack (xoxb-, xoxp-, xoxa-, xoxs-), OpenAI-style (sk-), AWS access keys (AKIA...), GitLab (glpat-);
- a high-entropy word (at least 32 characters of letters and digits mixing upper case, lower case and digits,
  as base64/base62 secrets do; hex digests and version strings do not) is replaced by `<redacted>`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

REDACTED = "<redacted>"
SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "KEY", "AUTH", "CRED")
_URL_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@")
_TOKEN = re.compile(
    r"(?<![A-Za-z0-9])(github_pat_|gh[pousr]_|hf_|xox[bpas]-|sk-|glpat-)[A-Za-z0-9_\-]{16,}"
    r"|(?<![A-Za-z0-9])(AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9])"
)
_WORD = re.compile(r"(?<![A-Za-z0-9])[A-Za-z0-9]{32,}(?![A-Za-z0-9])")


def is_secret_name(name: str) -> bool:
    """Whether a variable's name suggests it holds a secret (NCCL_IB_AUTH_KEY, HF_TOKEN, PIP_CRED...)."""
    upper = name.upper()
    return any(word in upper for word in SECRET_WORDS)


def _high_entropy(word: str) -> bool:
    return (
        any(c.isupper() for c in word)
        and any(c.islower() for c in word)
        and any(c.isdigit() for c in word)
        and len(set(word)) >= 16
    )


def redact_tokens(text: str) -> str:
    """Replace token-shaped words (known prefixes kept: `ghp_<redacted>`) and high-entropy words."""
    text = _TOKEN.sub(lambda m: (m.group(1) or m.group(2)) + REDACTED, text)
    return _WORD.sub(lambda m: REDACTED if _high_entropy(m.group()) else m.group(), text)


def redact_value(value: str) -> str:
    """Hide credentials inside URLs (`https://user:token@host` -> `https://<redacted>@host`) and tokens."""
    return redact_tokens(_URL_USERINFO.sub(rf"\1{REDACTED}@", value))


def redact_deep(value: Any) -> Any:
    """`value` (JSON-like: dicts, lists, strings) with every string, key included, passed through redact_value."""
    if isinstance(value, str):
        return redact_value(value)
    if isinstance(value, dict):
        return {redact_deep(k): redact_deep(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_deep(v) for v in value]
    return value


def redact_env(environ: Mapping[str, str], prefixes: Iterable[str]) -> dict[str, str]:
    """The variables whose names start with one of `prefixes`, sorted, each redacted by name, in URLs and tokens."""
    wanted = tuple(prefixes)
    return {
        name: REDACTED if is_secret_name(name) else redact_value(environ[name])
        for name in sorted(environ)
        if name.startswith(wanted)
    }
