"""Does this torch build carry kernels (SASS or JIT-able PTX) for a GPU's compute capability?"""

from __future__ import annotations

import re

# First CUDA release whose torch builds can target an architecture (CUDA release notes).
MIN_CUDA_FOR = {(12, 0): "12.8", (10, 0): "12.8", (9, 0): "11.8", (8, 9): "11.8", (8, 6): "11.1",
                (8, 0): "11.0", (7, 5): "10.0"}
# CUDA 13 removed offline compilation for Maxwell, Pascal and Volta (sm_50 .. sm_70).
LAST_CUDA_FOR_OLD = "12.9"


def arch_coverage(capability: tuple[int, int], arch_list: list[str]) -> str | None:
    """How the build covers the GPU ('sm_86 SASS', 'compute_90 PTX JIT'), or None when it does not."""
    major, minor = capability
    for arch in arch_list:
        m = re.fullmatch(r"(sm|compute)_(\d+)(\d)([af]?)", arch)
        if not m:
            continue
        kind, a_major, a_minor, suffix = m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)
        if suffix == "a" and (a_major, a_minor) != (major, minor):
            continue  # arch-specific features run only on that exact GPU
        if kind == "sm" and a_major == major and a_minor <= minor:
            return f"{arch} SASS"
        if kind == "compute" and (a_major, a_minor) <= (major, minor):
            return f"{arch} PTX (JIT-compiled at first use)"
    return None


def builds_supporting(capability: tuple[int, int]) -> str:
    """Which CUDA builds of torch support a compute capability, in words."""
    if capability < (7, 5):
        return f"CUDA <= {LAST_CUDA_FOR_OLD} builds that still list sm_{capability[0]}{capability[1]}"
    best = next((cuda for cap, cuda in sorted(MIN_CUDA_FOR.items(), reverse=True) if capability >= cap), "12.8")
    return f"CUDA >= {best} builds (e.g. pip install torch --index-url https://download.pytorch.org/whl/cu" \
        f"{best.replace('.', '')})"
