"""CUDA_VISIBLE_DEVICES against this host's GPUs: a value that hides every GPU (empty, -1, a repeated entry), an index
beyond the device nodes, or a GPU/MIG UUID that NVML does not list (envcheck.checks.cuda.layers names it as a layer)."""

from __future__ import annotations

import re
from typing import Any


def nvml_uuids(nvml: list[dict[str, Any]] | str | None) -> list[str] | None:
    """Every GPU and MIG device UUID NVML lists; None when NVML could not tell."""
    if not isinstance(nvml, list):
        return None
    return [u for g in nvml for u in [g.get("uuid"), *g.get("mig_devices", [])] if isinstance(u, str)]


def _uuid_problem(value: str, token: str, nvml: list[dict[str, Any]] | str | None) -> str | None:
    known = nvml_uuids(nvml)
    if known is None:  # not a finding: said in the unknown finding's text (see unchecked_uuids)
        return None
    if not any(u.lower().startswith(token.lower()) for u in known):  # CUDA accepts an unambiguous UUID prefix
        return (
            f"CUDA_VISIBLE_DEVICES={value!r} names {token}, which no GPU here has (NVML lists "
            f"{', '.join(known) or 'no GPU'}): CUDA then sees no device"
        )
    return None


def unchecked_uuids(value: str | None, nvml: list[dict[str, Any]] | str | None) -> str:
    """' (CUDA_VISIBLE_DEVICES names GPU-..., which could not be checked ...)' when NVML could not tell, else ''."""
    tokens = [t.strip() for t in (value or "").split(",") if t.strip().startswith(("GPU-", "MIG-"))]
    if not tokens or nvml_uuids(nvml) is not None:
        return ""
    why = nvml if isinstance(nvml, str) else "NVML state was not captured"
    return (
        f" (CUDA_VISIBLE_DEVICES names {', '.join(tokens)}, which could not be checked against this host's "
        f"GPUs: {why})"
    )


def visible_devices_problem(
    value: str | None, gpu_nodes: int, nvml: list[dict[str, Any]] | str | None = None
) -> str | None:
    """Why CUDA_VISIBLE_DEVICES leaves CUDA no device (empty, -1, a repeat, an index past the GPUs, an unknown
    UUID), or None when it names usable GPUs or is unset."""
    if value is None:
        return None
    if not value.strip():
        return "CUDA_VISIBLE_DEVICES is set but empty, which hides every GPU"
    tokens = [t.strip() for t in value.split(",")]
    if tokens[0] == "-1":
        return "CUDA_VISIBLE_DEVICES=-1 hides every GPU (the usual way to ask for none)"
    repeated = sorted({t for t in tokens if tokens.count(t) > 1})
    if repeated:
        return f"CUDA_VISIBLE_DEVICES={value!r} names {', '.join(repeated)} more than once (CUDA then sees no GPU)"
    for token in (t.strip() for t in value.split(",")):
        if token.startswith(("GPU-", "MIG-")):
            uuid = _uuid_problem(value, token, nvml)
            if uuid:
                return uuid
            continue
        if not re.fullmatch(r"\d+", token):
            return f"CUDA_VISIBLE_DEVICES={value!r} is invalid ({token!r} is not a GPU index or UUID)"
        if gpu_nodes and int(token) >= gpu_nodes:
            return f"CUDA_VISIBLE_DEVICES={value!r} names GPU {token}, but only {gpu_nodes} exist"
    return None
