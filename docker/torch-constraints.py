"""Print the pip/uv constraints that keep an image's torch stack: torch, torchvision, torchaudio, triton and every
nvidia-*/cuda-* wheel they brought in, each pinned to the version installed now. Stdlib only.

The image installs the result as /etc/pip/constraint.txt and points PIP_CONSTRAINT and UV_CONSTRAINT at it (as NGC's
images do), so a later `pip install` of a package that needs another torch fails with pip's own conflict message
instead of swapping the CUDA torch for a CPU one (pytorch/pytorch#168065). docs/images.md says how to override it.

The nvidia-*/cuda-* set is the dependency closure of the torch packages, not every name with that prefix: envcheck's
own nvidia-ml-py (NVML bindings) stays free to upgrade.
"""

from __future__ import annotations

import importlib.metadata as md
import re
import sys

ROOTS = ("torch", "torchvision", "torchaudio", "triton")
STACK = re.compile(r"^(torch|torchvision|torchaudio|triton|nvidia-.+|cuda-.+)$")


def canonical(name: str) -> str:
    """PEP 503 name: lower case, runs of -_. as one dash."""
    return re.sub(r"[-_.]+", "-", name).lower()


def installed() -> dict[str, md.Distribution]:
    """Every installed distribution by canonical name."""
    return {canonical(d.metadata["Name"]): d for d in md.distributions() if d.metadata["Name"]}


def closure(dists: dict[str, md.Distribution]) -> set[str]:
    """The installed distributions the roots depend on, transitively (markers and extras followed, so that
    cuda-toolkit[cublas,...]'s extra-only requirements count; only installed names are kept)."""
    todo = [r for r in ROOTS if r in dists]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for req in dists[name].requires or []:
            match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
            dep = canonical(match.group(1)) if match else ""
            if dep in dists and dep not in seen:
                todo.append(dep)
    return seen


def constraints() -> list[str]:
    """`name==version` lines, sorted."""
    dists = installed()
    return sorted(f"{name}=={dists[name].version}" for name in closure(dists) if STACK.match(name))


def main() -> int:
    lines = constraints()
    if not any(line.startswith("torch==") for line in lines):
        print("torch is not installed in this interpreter: nothing to pin", file=sys.stderr)
        return 1
    print("# The image's torch stack (docker/torch-constraints.py). pip and uv read this file through")
    print("# PIP_CONSTRAINT / UV_CONSTRAINT: an install that would replace one of these fails.")
    print("# To replace them on purpose: PIP_CONSTRAINT= pip install ... (docs/images.md).")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
