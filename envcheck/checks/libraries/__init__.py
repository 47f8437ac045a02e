"""libs.cuda: which copy of each CUDA library won the loader's search, against what torch pins and the wheels ship.

Three real-world faults: two distributions of one NVIDIA library family (nvidia-nccl-cu12 next to nvidia-nccl-cu13
after switching torch's CUDA; both write nvidia/nccl/lib/libnccl.so.2), an `LD_LIBRARY_PATH` or `LD_PRELOAD` copy
shadowing the wheel's (the loader searches LD_LIBRARY_PATH before torch's RUNPATH), and an installed version that
is not the one torch pins. `cudnn.conv` compares loaded and compiled cuDNN; this names the path that won and the pin.
When `import torch` itself fails on a library (`libcudnn.so.9: cannot open shared object file`, `undefined symbol:
ncclCommRegister`), the error text is captured and the verdict names the library and where the loader found it.
Capture reads metadata only (METADATA, RECORD), `/proc/self/maps` and the LD_LIBRARY_PATH directories' listings.
"""

from __future__ import annotations

from envcheck.checks.libraries.inputs import capture, nvidia_dists, pins, required_by, validate
from envcheck.checks.libraries.rules import findings, verdict
from envcheck.core.check import CheckSpec, Context, Needs
from envcheck.core.result import Result
from envcheck.core.section import Section

__all__ = [
    "CHECKS",
    "SECTION",
    "capture",
    "findings",
    "nvidia_dists",
    "pins",
    "required_by",
    "validate",
    "verdict",
]

SECTION = Section("libraries", "libs.cuda", capture, validate, verdict)


def libs_cuda(ctx: Context) -> Result:
    """The CUDA libraries torch loaded are the wheels' copies at the pinned versions, one distribution each."""
    return SECTION.judge(ctx)


CHECKS = (
    CheckSpec(
        "libs.cuda",
        libs_cuda,
        "each loaded CUDA library is the pinned wheel's copy (not LD_LIBRARY_PATH's);"
        " one distribution per NVIDIA library family",
        needs=Needs(torch=True),
        timeout_s=30,
    ),
)
