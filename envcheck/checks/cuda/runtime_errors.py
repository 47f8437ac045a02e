"""CUDA errors reach Python, as PyTorch's release smoke test demands: a device-side assert
(test_cuda_runtime_errors_captured: `torch._assert_async` on a CUDA tensor must raise a RuntimeError naming CUDA)
and a GPUDirect Storage failure (test_cuda_gds_errors_captured: `torch.cuda.gds.GdsFile` on a file GDS cannot
register must raise "cuFileHandleRegister failed", CUDA >= 12.6). An error that vanishes, or arrives as something
else, is a build that hides GPU failures from the job: the image's to fix. The pure verdicts are tested with staged
outcomes; the checks themselves run in the GPU proof (`pytest -m gpu`)."""

from __future__ import annotations

import os
import re
import tempfile

from envcheck.checks.build.compiled_in import torch_reinstall
from envcheck.checks.cuda.live_errors import WORKER_RESTART
from envcheck.core.check import CheckSpec, Context, Level, Needs
from envcheck.core.result import FaultClass, Result, failed, passed, skipped
from envcheck.core.versions import release

# Finding codes this module emits (each one is in envcheck.cluster.finding_codes.TABLE).
ASSERT_LOST = "cuda.assert_lost"
ASSERT_UNNAMED = "cuda.assert_unnamed"
GDS_ERROR = "cuda.gds_error"
GDS_MISSING = "cuda.gds_missing"

GDS_SINCE = (12, 6)  # the smoke test skips GDS before CUDA 12.6
GDS_EXPECTED = "cuFileHandleRegister failed"


def assert_verdict(raised: str | None, version: str, cuda: str | None) -> Result:
    """`raised`: the text of what torch._assert_async raised (None: nothing was raised)."""
    restart = {"restart_worker": True}  # a device-side assert leaves the CUDA context unusable
    if raised is None:
        return failed(
            f"a device-side assert on the GPU raised nothing: CUDA kernel errors do not reach Python in "
            f"this build, so a job's out-of-bounds index or NaN check fails silently ({WORKER_RESTART})",
            torch_reinstall(version, cuda),
            fault_class=FaultClass.IMAGE,
            code=ASSERT_LOST,
            **restart,
        )
    if not re.search("CUDA", raised):
        return failed(
            f"a device-side assert raised an error that does not name CUDA: {raised[:200]} "
            f"({WORKER_RESTART})",
            torch_reinstall(version, cuda),
            fault_class=FaultClass.IMAGE,
            code=ASSERT_UNNAMED,
            measured={"raised": raised[:300]},
            **restart,
        )
    return passed(
        f"a device-side assert reaches Python as a CUDA error: {raised.splitlines()[0][:160]} "
        f"({WORKER_RESTART})",
        measured={"raised": raised[:300]},
        **restart,
    )


def gds_verdict(cuda: str | None, has_gds: bool, raised: str | None, version: str) -> Result:
    """`raised`: the text GdsFile raised on a temp file (None: it opened, GDS works on that filesystem)."""
    if not cuda or tuple((release(cuda) or (0, 0))[:2]) < GDS_SINCE:
        return skipped(f"GDS needs a CUDA >= 12.6 torch (this one: {cuda or 'CPU'})")
    if not has_gds:
        return failed(
            f"torch (CUDA {cuda}) has no torch.cuda.gds: GPUDirect Storage is missing from the build",
            torch_reinstall(version, cuda),
            fault_class=FaultClass.IMAGE,
            code=GDS_MISSING,
        )
    if raised is None:
        return passed(
            "GPUDirect Storage registers a file here (cuFileHandleRegister succeeded)",
            measured={"gds": "registered"},
        )
    if GDS_EXPECTED in raised:
        return passed(
            f"GPUDirect Storage errors reach Python: {raised.splitlines()[0][:160]} (this filesystem or "
            "host has no GDS; expected where nvidia-fs is not loaded)",
            measured={"gds": raised[:300]},
        )
    return failed(
        f"GPUDirect Storage fails with an error that is not cuFile's: {raised.splitlines()[0][:200]}",
        "pip install the nvidia-cufile wheel torch pins (pip install --force-reinstall torch==<its "
        f"version>), and keep LD_LIBRARY_PATH from loading another libcufile; {torch_reinstall(version, cuda)}",
        fault_class=FaultClass.IMAGE,
        code=GDS_ERROR,
        measured={"gds": raised[:300]},
    )


def device_assert(ctx: Context) -> Result:
    """torch._assert_async(0) on the GPU raises a RuntimeError naming CUDA."""
    import torch

    raised = None
    try:
        torch._assert_async(torch.tensor(0, device="cuda"))
        torch._assert_async(torch.tensor(0 + 0j, device="cuda"))
        torch.cuda.synchronize()
    except RuntimeError as exc:
        raised = str(exc)
    return assert_verdict(raised, torch.__version__, torch.version.cuda)


def cuda_gds(ctx: Context) -> Result:
    """torch.cuda.gds.GdsFile on a temp file registers it or raises cuFile's own error."""
    import torch

    gds = getattr(torch.cuda, "gds", None)
    has = gds is not None and hasattr(gds, "GdsFile")
    raised = None
    if (
        gds is not None
        and has
        and torch.version.cuda
        and tuple((release(torch.version.cuda) or (0, 0))[:2]) >= GDS_SINCE
    ):
        with tempfile.NamedTemporaryFile() as f:
            try:
                gds.GdsFile(f.name, os.O_CREAT | os.O_RDWR)
            except RuntimeError as exc:
                raised = str(exc)
    return gds_verdict(torch.version.cuda, has, raised, torch.__version__)


# Full level, GPU only. The assert poisons its CUDA context: a worker of its own ("cuda_assert"), closed after it.
CHECKS = (
    CheckSpec(
        "cuda.device_assert",
        device_assert,
        "a device-side assert reaches Python as a CUDA error",
        Level.FULL,
        Needs(torch=True, cuda=True),
        timeout_s=60,
        group="cuda_assert",
    ),
    CheckSpec(
        "cuda.gds",
        cuda_gds,
        "GPUDirect Storage registers a file or surfaces cuFile's error",
        Level.FULL,
        Needs(torch=True, cuda=True),
        timeout_s=60,
    ),
)
