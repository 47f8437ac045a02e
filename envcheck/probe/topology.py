"""`distributed_facts()`: the GPU peer-access matrix, `nvidia-smi topo -m` and the backends.

NCCL versions (compiled and loaded) live in the torch section of `envcheck.probe.facts`; every value
here is present or says why it is absent, and every probe is bounded (`probe.run_command`).
"""

from __future__ import annotations

from typing import Any

from envcheck.probe.system import CommandOutput, CommandRunner, absent, run_command

TOPO_TIMEOUT_S = 10.0


def nvidia_topology(run: CommandRunner = run_command) -> Any:
    """`nvidia-smi topo -m` text, or why it is absent."""
    out = run(["nvidia-smi", "topo", "-m"], TOPO_TIMEOUT_S)
    if not isinstance(out, CommandOutput):
        return out
    if out.returncode != 0:
        return absent(f"nvidia-smi topo -m failed: {(out.stderr or out.stdout).strip() or out.returncode}")
    return out.stdout.rstrip()


def distributed_facts(run: CommandRunner = run_command) -> dict[str, Any]:
    """Facts for the distributed domain (safe without torch or GPUs)."""
    facts: dict[str, Any] = {"nvidia_topology": nvidia_topology(run)}
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        why = absent("torch is not installed")
        return {**facts, "p2p_matrix": why, "backends": why}
    facts["backends"] = {
        "available": dist.is_available(),
        "nccl": dist.is_available() and dist.is_nccl_available(),
        "gloo": dist.is_available() and dist.is_gloo_available(),
    }
    if not torch.cuda.is_available():
        facts["p2p_matrix"] = absent(
            "no CUDA device visible" if torch.version.cuda else "CPU-only torch build"
        )
        return facts
    count = torch.cuda.device_count()
    facts["p2p_matrix"] = [
        [i == j or bool(torch.cuda.can_device_access_peer(i, j)) for j in range(count)] for i in range(count)
    ]
    return facts
