"""torchvision: installed, built for this torch and its CUDA, and its C++ ops registered and correct."""

from __future__ import annotations

import importlib.machinery
import importlib.metadata
import importlib.util
import traceback
from dataclasses import dataclass
from typing import Any

from envcheck.checks.cuda.live_errors import WORKER_RESTART
from envcheck.checks.image import image_fix, read_declared
from envcheck.checks.vision_pairing import (
    build_mismatch,
    cuda_mismatch,
    cuda_text,
    fix_command,
    matching_torchvision,
    pair_fix,
    pairing_problem,
    torch_pin,
)
from envcheck.core.check import CheckSpec, Context, Level, Needs
from envcheck.core.result import FaultClass, Result, failed, passed, skipped, warned


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


def declared_torchvision() -> tuple[str | None, dict[str, Any] | None]:
    """The torchvision an envcheck image declares (None when none is declared), and the declaration."""
    try:
        declared = read_declared()
    except (OSError, ValueError):  # an unreadable declaration is image.versions' finding, not ours
        return None, None
    if not declared or not declared.get("torchvision"):
        return None, declared
    return str(declared["torchvision"]), declared


# Fix for a failure whose cause is not versions: reinstalling would not help, so say what to look at.
NOT_VERSIONS_FIX = (
    "torch and torchvision pair, so reinstalling will not help: look for what else changes them "
    "here (a torch.library override of torchvision::*, a sitecustomize or .pth that patches "
    "torch, LD_PRELOAD); the details show the error"
)


# torchvision's compiled ops library: `_C_stable` since 0.29 (built on torch's stable ABI), `_C` before.
OPS_LIBRARIES = ("_C_stable", "_C")


def ops_library() -> str | None:
    """The path of torchvision's compiled ops library, found the way torchvision.extension finds it, without
    importing the torchvision package (whose import costs about as much as torch's own: it pulls in
    torch._dynamo and torch.onnx); None when none of the known names is there (a layout this envcheck does
    not know: vision.ops then imports the package instead)."""
    spec = importlib.util.find_spec("torchvision")
    folders = list(spec.submodule_search_locations or []) if spec else []
    details = (importlib.machinery.ExtensionFileLoader, importlib.machinery.EXTENSION_SUFFIXES)
    for folder in folders:
        for name in OPS_LIBRARIES:
            found = importlib.machinery.FileFinder(folder, details).find_spec(name)
            if found is not None and found.origin:
                return found.origin
    return None


class LoadedOps:
    """torchvision's operators called through torch.ops, as torchvision.ops calls them (same arguments)."""

    def nms(self, boxes: Any, scores: Any, iou_threshold: float) -> Any:
        import torch

        return torch.ops.torchvision.nms(boxes, scores, iou_threshold)

    def roi_align(
        self,
        feats: Any,
        rois: Any,
        output_size: int,
        spatial_scale: float,
        sampling_ratio: int,
        aligned: bool,
    ) -> Any:
        import torch

        return torch.ops.torchvision.roi_align(
            feats, rois, spatial_scale, output_size, output_size, sampling_ratio, aligned
        )


@dataclass
class _Installed:
    """The torchvision found beside torch: its version, the torch it pins, the fix to offer, the image's
    declared torchvision (None outside an envcheck image), and what the result will carry."""

    version: str
    pin: str | None
    fix: str | None
    want: Any
    measured: dict[str, object]


def _installed() -> _Installed | Result:
    """The torchvision installed, or the verdict that ends the check early (torchvision absent)."""
    import torch

    want, declared = declared_torchvision()
    # Inside an image that declares torchvision, the fix is the image's own pins: the same one image.versions gives.
    tv_fix = image_fix(declared) if want and declared else fix_command(torch.__version__)
    try:
        tv_version = importlib.metadata.version("torchvision")
    except importlib.metadata.PackageNotFoundError:
        if want:
            return failed(
                f"torchvision is not installed, but this image declares torchvision {want}",
                tv_fix,
                expected={"torchvision": want},
                fault_class=FaultClass.IMAGE,
            )
        return skipped(
            "torchvision is not installed and no envcheck image declares it (install it to check it: "
            f"{fix_command(torch.__version__).split(' from ONE')[0]})"
        )
    pin = torch_pin(importlib.metadata.requires("torchvision") or [])
    return _Installed(
        tv_version,
        pin,
        tv_fix,
        want,
        {
            "torch": torch.__version__,
            "torchvision": tv_version,
            "torch_cuda": torch.version.cuda,
            "torchvision_requires_torch": pin,
        },
    )


def _import_failure(tv: _Installed, torch_version: str, exc: BaseException, what: str) -> Result:
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


def _judge(ops: Any, tv: _Installed, tv_cuda: str | None, how: str) -> Result:
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

    tv = _installed()
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

    tv = _installed()
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
