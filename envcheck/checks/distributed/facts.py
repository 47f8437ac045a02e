"""`distributed_facts()`: NCCL versions, the GPU peer-access matrix and `nvidia-smi topo -m`.

Every value is present or says why it is absent (`{"absent": "..."}`); every probe is bounded.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from typing import Any

TOPO_TIMEOUT_S = 10.0
Runner = Callable[[list[str], float], str]


def _run(argv: list[str], timeout: float) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=True)
    return done.stdout


def _absent(why: str) -> dict[str, str]:
    return {"absent": why}


def nvidia_topology(run: Runner = _run) -> Any:
    """`nvidia-smi topo -m` text, or why it is absent."""
    if shutil.which("nvidia-smi") is None and run is _run:
        return _absent("nvidia-smi not found on PATH (no NVIDIA driver utilities in this environment)")
    try:
        return run(["nvidia-smi", "topo", "-m"], TOPO_TIMEOUT_S).rstrip()
    except subprocess.TimeoutExpired:
        return _absent(f"nvidia-smi topo -m did not answer within {TOPO_TIMEOUT_S:g}s")
    except (subprocess.CalledProcessError, OSError) as exc:
        return _absent(f"nvidia-smi topo -m failed: {exc}")


def nccl_pinned_by_torch() -> Any:
    """The NCCL version the torch wheel was built for (its nvidia-nccl-* pin), or why it is absent."""
    from importlib import metadata

    try:
        requires = metadata.requires("torch") or []
    except metadata.PackageNotFoundError:
        return _absent("torch has no package metadata (built from source?)")
    for req in requires:
        name, sep, version = req.split(";")[0].strip().partition("==")
        if name.startswith("nvidia-nccl") and sep:
            return f"{version.strip()} (pinned by the torch wheel: {name})"
    return _absent("the torch wheel pins no nvidia-nccl package (NCCL linked statically or a source build)")


def distributed_facts(run: Runner = _run) -> dict[str, Any]:
    """Facts for the distributed domain (safe without torch or GPUs)."""
    facts: dict[str, Any] = {"nvidia_topology": nvidia_topology(run)}
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        why = _absent("torch is not installed")
        return {**facts, "nccl_compiled": why, "nccl_loaded": why, "p2p_matrix": why, "backends": why}
    facts["backends"] = {"available": dist.is_available(), "nccl": dist.is_available() and dist.is_nccl_available(),
                         "gloo": dist.is_available() and dist.is_gloo_available()}
    if not torch.cuda.is_available():
        why = _absent("no CUDA device visible" if torch.version.cuda else "CPU-only torch build")
        return {**facts, "nccl_compiled": why, "nccl_loaded": why, "p2p_matrix": why}
    try:
        facts["nccl_loaded"] = ".".join(str(v) for v in torch.cuda.nccl.version())
    except Exception as exc:
        facts["nccl_loaded"] = _absent(f"NCCL could not be loaded: {exc}")
    facts["nccl_compiled"] = nccl_pinned_by_torch()
    count = torch.cuda.device_count()
    facts["p2p_matrix"] = [[i == j or bool(torch.cuda.can_device_access_peer(i, j)) for j in range(count)]
                           for i in range(count)]
    return facts
