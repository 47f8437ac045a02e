"""Which pip package gives an nvcc of exactly torch's CUDA. Stdlib only: the devel image runs it as a script.

torch on CUDA 13 pins `cuda-toolkit[...]==13.0.x`: nvcc comes from the same cuda-toolkit release.
torch on CUDA 12 pins `nvidia-cuda-runtime-cu12==12.x.y`: nvcc is `nvidia-cuda-nvcc-cu12==12.x.*`.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable

DEVEL_EXTRAS = "nvcc,crt,cccl,nvvm,cudart"


def nvcc_requirement(torch_requires: Iterable[str], cuda: str) -> str:
    """The pip requirement for nvcc + headers matching `cuda` (torch.version.cuda), from torch's deps."""
    for req in torch_requires:
        m = re.match(r"cuda-toolkit\s*(\[[^\]]*\])?\s*==\s*([\d.]+)", req)
        if m and m.group(2).startswith(cuda + "."):
            return f"cuda-toolkit[{DEVEL_EXTRAS}]=={m.group(2)}"
    major = cuda.split(".")[0]
    return f"nvidia-cuda-nvcc-cu{major}=={cuda}.*"


def main() -> int:
    """Print the requirement for the torch installed in this interpreter."""
    import importlib.metadata

    import torch

    if not torch.version.cuda:
        print("torch is a CPU build; the devel target needs a CUDA torch", file=sys.stderr)
        return 1
    print(nvcc_requirement(importlib.metadata.requires("torch") or [], torch.version.cuda))
    return 0


if __name__ == "__main__":
    sys.exit(main())
