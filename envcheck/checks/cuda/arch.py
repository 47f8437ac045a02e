"""Does this torch build carry kernels (SASS or JIT-able PTX) for a GPU's compute capability?"""

from __future__ import annotations

import re

# First CUDA release whose torch builds can target an architecture (CUDA release notes): sm_100 (B200) and
# sm_120 (RTX 50xx, RTX PRO Blackwell) 12.8; sm_103 (B300/GB300) and sm_121 (DGX Spark GB10) 12.9; sm_101
# (Jetson Thor) 12.9, renamed sm_110 in 13.0. PyTorch ships cu128/cu129/cu130 wheel indexes for these.
MIN_CUDA_FOR = {
    (12, 1): "12.9",
    (12, 0): "12.8",
    (11, 0): "13.0",
    (10, 3): "12.9",
    (10, 1): "12.9",
    (10, 0): "12.8",
    (9, 0): "11.8",
    (8, 9): "11.8",
    (8, 6): "11.1",
    (8, 0): "11.0",
    (7, 5): "10.0",
}
NOTES = {
    (11, 0): "; Jetson Thor is aarch64: use the aarch64 cu130 wheels, or NVIDIA's Jetson builds",
    (10, 1): "; CUDA 13.0 renamed sm_101 to sm_110: prefer a CUDA 13 build",
}
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
            continue  # arch-specific (`a`) code runs only on exactly that arch
        if suffix == "f" and not (a_major == major and a_minor <= minor):
            continue  # family-specific (`f`) code runs only within its major family (10.x), at that minor or later
        if kind == "sm" and a_major == major and a_minor <= minor:
            return f"{arch} SASS"
        if kind == "compute" and (a_major, a_minor) <= (major, minor):
            return f"{arch} PTX (JIT-compiled at first use)"
    return None


def builds_supporting(capability: tuple[int, int]) -> str:
    """Which CUDA builds of torch support a compute capability, in words."""
    if capability < (7, 5):
        return f"CUDA <= {LAST_CUDA_FOR_OLD} builds that still list sm_{capability[0]}{capability[1]}"
    cap, best = next(
        ((cap, cuda) for cap, cuda in sorted(MIN_CUDA_FOR.items(), reverse=True) if capability >= cap),
        ((7, 5), "10.0"),
    )
    index = max(
        best, "12.8", key=lambda v: tuple(int(p) for p in v.split("."))
    )  # the oldest index still served
    return (
        f"CUDA >= {best} builds (e.g. pip install torch --index-url https://download.pytorch.org/whl/cu"
        f"{index.replace('.', '')}){NOTES.get(cap, '')}"
    )
