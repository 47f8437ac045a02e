"""What the torch build must have compiled in, as PyTorch's own release smoke test demands it
(pytorch/pytorch .ci/pytorch/smoke_test/smoke_test.py): OpenMP ("All PyTorch binary builds should be built with
OpenMP"), and NVSHMEM in CUDA builds from 2.9 on ("After 2.9: NVSHMEM is expected to be compiled in current build").
A build without them is a different torch than the release (a source build, a repackaging): the image's to fix."""

from __future__ import annotations

from envcheck.checks.build.compiled_in import nvshmem_verdict, openmp_verdict, torch_reinstall
from envcheck.core.check import CheckSpec, Context, Needs
from envcheck.core.result import Result

__all__ = ["CHECKS", "torch_reinstall"]


def build_openmp(ctx: Context) -> Result:
    """torch.backends.openmp is available, with the intra-op threads torch will use."""
    import torch

    return openmp_verdict(torch.backends.openmp.is_available(), torch.get_num_threads(), torch.__version__,
                          torch.version.cuda)


def build_nvshmem(ctx: Context) -> Result:
    """A CUDA torch >= 2.9 has NVSHMEM compiled in (and says whether it can load it here)."""
    import torch

    try:
        from torch._C._distributed_c10d import _is_nvshmem_available
    except ImportError as exc:
        return nvshmem_verdict(torch.__version__, torch.version.cuda, None, str(exc))
    try:
        available: bool | str = bool(_is_nvshmem_available())
    except Exception as exc:  # reported, not judged: whether this host can load it is a runtime question
        available = f"{type(exc).__name__}: {exc}"
    return nvshmem_verdict(torch.__version__, torch.version.cuda, available, None)


CHECKS = (
    CheckSpec("build.openmp", build_openmp, "torch is built with OpenMP (intra-op CPU parallelism)",
              needs=Needs(torch=True), timeout_s=30),
    CheckSpec("build.nvshmem", build_nvshmem, "a CUDA torch >= 2.9 has NVSHMEM compiled in (symmetric memory)",
              needs=Needs(torch=True), timeout_s=30),
)
