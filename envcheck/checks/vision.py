"""torchvision: installed, built for this torch and its CUDA, and its C++ ops registered and correct (what is installed,
and its ops library found without importing the package: vision_install.py; version pairing: vision_pairing.py)."""

from __future__ import annotations

import traceback
from typing import Any

from envcheck.checks.cuda.live_errors import WORKER_RESTART
from envcheck.checks.vision_install import Installed, LoadedOps, installed, ops_library
from envcheck.checks.vision_pairing import (
    build_mismatch,
    cuda_mismatch,
    cuda_text,
    matching_torchvision,
    pair_fix,
    pairing_problem,
)
from envcheck.core.check import CheckSpec, Context, Level, Needs
from envcheck.core.result import FaultClass, Result, failed, passed, warned


def _ops_problem(ops: Any, device: str) -> str | None:
    """Run nms and roi_align on inputs with known answers; the problem, or None when both are exact."""
    import torch

    boxes = torch.tensor(
        [[0, 0, 10, 10], [1, 1, 10, 10], [20, 20, 30, 30]], dtype=torch.float32, device=device
    )
    try:
        keep = ops.nms(boxes, torch.tensor([0.9, 0.8, 0.7], device=device), iou_threshold=0.5).tolist()
        feats = torch.arange(16, dtype=torch.float32, device=device).reshape(1, 1, 4, 4)
        roi = torch.tensor([[0, 0, 0, 4, 4]], dtype=torch.float32, device=device)
        pooled = float(
            ops.roi_align(
                feats, roi, output_size=1, spatial_scale=1.0, sampling_ratio=2, aligned=False
            ).item()
        )
    except Exception as exc:
        return f"torchvision ops fail on {device}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
    if keep != [0, 2] or abs(pooled - 10.0) > 1e-5:
        return (
            f"torchvision ops give wrong answers on {device}: nms kept {keep} (want [0, 2]), "
            f"roi_align mean {pooled} (want 10.0)"
        )
    return None


# Fix for a failure whose cause is not versions: reinstalling would not help, so say what to look at.
NOT_VERSIONS_FIX = (
    "torch and torchvision pair, so reinstalling will not help: look for what else changes them "
    "here (a torch.library override of torchvision::*, a sitecustomize or .pth that patches "
    "torch, LD_PRELOAD); the details show the error"
)


def _import_failure(tv: Installed, torch_version: str, exc: BaseException, what: str) -> Result:
    tv_version, pin, tv_fix, measured = tv.version, tv.pin, tv.fix, tv.measured
    chain: list[BaseException] = [exc]
    while (cause := chain[-1].__cause__ or chain[-1].__context__) is not None and len(chain) < 5:
        chain.append(cause)  # torch.ops.load_library says "Could not load this library"; the loader says why
    why = "; ".join(str(e).splitlines()[0] if str(e) else type(e).__name__ for e in chain)
    versions = pairing_problem(torch_version, tv_version, pin) or build_mismatch(why)
    if versions:
        return failed(
            f"torchvision {tv_version} {what} with torch {torch_version}: {why} ({versions})",
            tv_fix,
            measured=measured,
            expected={"import": "ok"},
            fault_class=FaultClass.IMAGE,
        )
    # A half-done import leaves operators registered: a re-import in this worker would fail differently.
    return failed(
        f"torchvision {tv_version} {what}: {why} ({WORKER_RESTART})",
        NOT_VERSIONS_FIX,
        measured=measured,
        expected={"import": "ok"},
        fault_class=FaultClass.IMAGE,
        details=traceback.format_exc(),
        restart_worker=True,
    )


def _judge(ops: Any, tv: Installed, tv_cuda: str | None, how: str) -> Result:
    """The verdict once torchvision's ops are loaded: CUDA pairing, then nms/roi_align exact on every device."""
    import torch

    tv_version, pin, tv_fix, want, measured = tv.version, tv.pin, tv.fix, tv.want, tv.measured
    measured["torchvision_cuda"] = tv_cuda
    cuda_problem = cuda_mismatch(torch.version.cuda, tv_cuda)
    if cuda_problem:
        return failed(
            cuda_problem,
            tv_fix,
            measured=measured,
            expected={"torchvision_cuda": torch.version.cuda},
            fault_class=FaultClass.IMAGE,
        )
    pairing = pairing_problem(torch.__version__, tv_version, pin)
    devices = ["cpu"] + (
        [f"cuda:{i}" for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    )
    measured["devices"] = devices
    for device in devices:
        problem = _ops_problem(ops, device)
        if problem and device.startswith("cuda:"):
            from envcheck.checks.cuda.live_errors import gpu_label, sticky_cuda_error

            problem = problem.replace(f"on {device}", f"on {device} = {gpu_label(int(device[5:]))}", 1)
            if sticky_cuda_error(problem):
                problem += " (a sticky CUDA error: envcheck restarts the worker for later checks)"
        if problem and pairing:
            return failed(f"{problem}; {pairing}", tv_fix, measured=measured, fault_class=FaultClass.IMAGE)
        if problem and device.startswith("cuda:"):
            return failed(
                problem,
                "check dmesg for Xid errors on that GPU and run nvidia-smi -q -i <index>; "
                + NOT_VERSIONS_FIX,
                measured=measured,
                fault_class=FaultClass.NODE,
            )
        if problem:
            return failed(problem, NOT_VERSIONS_FIX, measured=measured, fault_class=FaultClass.IMAGE)
    if pairing:
        return warned(
            f"{pairing}; nms and roi_align happen to work, but this pair is unsupported",
            tv_fix if want else pair_fix(torch.__version__, tv_version),
            measured=measured,
            expected={"torchvision": matching_torchvision(torch.__version__)},
            fault_class=FaultClass.IMAGE,
        )
    return passed(
        f"torchvision {tv_version} matches torch {torch.__version__}; {how}; nms and roi_align exact on "
        f"{', '.join(devices)}",
        measured=measured,
    )


def vision_ops(ctx: Context) -> Result:
    """torchvision matches torch's version and CUDA, its compiled ops load into this torch, and nms/roi_align
    give exact answers. The ops library is loaded directly, as torchvision.extension loads it, so the quick
    level does not pay for importing the whole package (vision.import does that at the full level)."""
    import torch

    tv = installed()
    if isinstance(tv, Result):
        return tv
    library = ops_library()
    if library is None:  # an unknown layout: judge it by importing the package, as a user's job would
        return vision_import(ctx)
    tv.measured["ops_library"] = library
    try:
        torch.ops.load_library(library)
        code = int(
            torch.ops.torchvision._cuda_version()
        )  # what torchvision.extension._check_cuda_version asks
    except Exception as exc:
        return _import_failure(tv, torch.__version__, exc, "has C++ ops that do not load")
    return _judge(LoadedOps(), tv, cuda_text(code) if code > 0 else None, "its C++ ops load")


def vision_import(ctx: Context) -> Result:
    """The whole torchvision package imports (what a user's `import torchvision` does) and torchvision.ops'
    nms/roi_align give exact answers through its Python API."""
    import torch

    tv = installed()
    if isinstance(tv, Result):
        return tv
    try:
        import torchvision
        from torchvision import ops
    except Exception as exc:
        return _import_failure(tv, torch.__version__, exc, "does not import")
    return _judge(ops, tv, cuda_text(torchvision.version.cuda), "the package imports")


CHECKS = (
    CheckSpec(
        "vision.ops",
        vision_ops,
        "torchvision matches torch (version, CUDA); its C++ ops load; nms/roi_align exact",
        needs=Needs(torch=True),
        timeout_s=90,
    ),
    CheckSpec(
        "vision.import",
        vision_import,
        "the whole torchvision package imports; torchvision.ops exact",
        level=Level.FULL,
        needs=Needs(torch=True),
        timeout_s=90,
        preload=("torchvision",),
    ),
)
