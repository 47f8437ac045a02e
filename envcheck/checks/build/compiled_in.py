"""The pure verdicts of the build.* checks (tested with staged inputs; the checks feed them the real torch)."""

from __future__ import annotations

from envcheck.core.result import FaultClass, Result, failed, passed, skipped
from envcheck.core.versions import public, release

# Finding codes this module emits (each one is in envcheck.cluster.finding_codes.TABLE).
NO_NVSHMEM = "build.no_nvshmem"
NO_OPENMP = "build.no_openmp"

NVSHMEM_SINCE = (2, 9)  # the smoke test: "torch is not compiled with NVSHMEM prior to 2.9"


def torch_reinstall(version: str, cuda: str | None) -> str:
    """The official wheel of this torch, from PyTorch's own index for its CUDA (or CPU) flavour."""
    flavour = "cu" + cuda.replace(".", "") if cuda else "cpu"
    return (f"pip install --force-reinstall torch=={public(version)} --index-url "
            f"https://download.pytorch.org/whl/{flavour} (PyTorch's release wheels have it; a source build or a "
            "repackaged torch may not)")


def openmp_verdict(available: bool, threads: int, version: str, cuda: str | None) -> Result:
    """PASS when OpenMP is compiled in; FAIL (image) when not: every CPU op then runs on one thread."""
    measured = {"openmp": available, "intra_op_threads": threads}
    if available:
        return passed(f"torch {version} is built with OpenMP ({threads} intra-op threads)", measured=measured)
    return failed(f"torch {version} is built without OpenMP: CPU ops (and DataLoader's collate, Inductor's CPU "
                  "kernels) run single-threaded, and PyTorch's release smoke test refuses such a build",
                  torch_reinstall(version, cuda), measured=measured, expected={"openmp": True},
                  fault_class=FaultClass.IMAGE, code=NO_OPENMP)


def nvshmem_verdict(version: str, cuda: str | None, available: bool | str | None, import_error: str | None
                    ) -> Result:
    """Compiled in (available: what `_is_nvshmem_available()` said, or its error) or not (import_error)."""
    numbers = release(version) or ()
    if not cuda:
        return skipped(f"torch {version} is a CPU build: NVSHMEM is part of the CUDA builds")
    if import_error is not None:
        if tuple(numbers[:2]) < NVSHMEM_SINCE:
            return skipped(f"torch {version} predates NVSHMEM in the release builds (2.9)")
        return failed(f"torch {version} (CUDA {cuda}) is not compiled with NVSHMEM ({import_error}): symmetric "
                      "memory and NVSHMEM-based collectives are missing; PyTorch's release smoke test requires it "
                      "from 2.9 on", torch_reinstall(version, cuda), measured={"nvshmem_compiled": False},
                      expected={"nvshmem_compiled": True}, fault_class=FaultClass.IMAGE, code=NO_NVSHMEM)
    here = ("it loads here" if available is True else "it cannot load here (no NVSHMEM-capable GPU or library: "
            f"{available})" if isinstance(available, str) else "not usable on this host (no GPU, or no "
            "libnvshmem_host; it is needed only by symmetric-memory code)")
    return passed(f"torch {version} is compiled with NVSHMEM; {here}",
                  measured={"nvshmem_compiled": True, "nvshmem_available": available})
