"""torchvision: installed, built for this torch and its CUDA, and its C++ ops registered and correct."""

from __future__ import annotations

import importlib.machinery
import importlib.metadata
import importlib.util
import re
import traceback
from dataclasses import dataclass
from typing import Any

from envcheck.checks.cuda.live_errors import WORKER_RESTART
from envcheck.checks.image import image_fix, read_declared
from envcheck.core.check import CheckSpec, Context, Level, Needs
from envcheck.core.result import Result, failed, passed, skipped, warned
from envcheck.core.versions import (
    cuda_version_text,
    pinned,
    public,
    release,
    torch_minor_for,
    torchvision_minor_for,
)


def matching_torchvision(torch_version: str) -> str | None:
    """The torchvision minor that pairs with a torch release (2.8 -> 0.23, 2.13 -> 0.28)."""
    numbers = release(torch_version)
    return f"0.{torchvision_minor_for(numbers[1])}" if numbers and len(numbers) >= 2 and numbers[0] == 2 else None


def fix_command(torch_version: str) -> str:
    """The concrete reinstall that makes torch and torchvision match."""
    base = public(torch_version)
    tv = matching_torchvision(base)
    pair = f"torch=={base} torchvision=={tv}.*" if tv else "torch torchvision"
    return (f"pip install --force-reinstall {pair} from ONE index (PyPI's CUDA wheels, or e.g. "
            "--index-url https://download.pytorch.org/whl/cu128); a CUDA torchvision never works with a CPU torch")


def cuda_text(value: object) -> str | None:
    """torchvision >= 0.26 reports its CUDA as an int (13000); older ones as text ('12.8')."""
    if isinstance(value, int) and not isinstance(value, bool):
        return cuda_version_text(value)
    return None if value is None else str(value)


def pair_fix(torch_version: str, tv_version: str) -> str:
    """Both ways to make an unsupported pair match: the torch this torchvision was built for, or the reverse."""
    numbers = release(tv_version)
    torch_minor = torch_minor_for(numbers[1]) if numbers and len(numbers) >= 2 and numbers[0] == 0 else None
    back = (f"pip install --force-reinstall torch==2.{torch_minor}.* torchvision=={tv_version}"
            if torch_minor is not None else "")
    return (f"{back} (the torch this torchvision was built for), or " if back else "") + fix_command(torch_version)


def _torch_pin(requires: list[str]) -> str | None:
    """The torch this torchvision was built for, from its metadata: `torch==2.9.1` or `torch (==2.11.0)`."""
    return pinned(requires, "torch")


def cuda_mismatch(torch_cuda: str | None, tv_cuda: str | None) -> str | None:
    """A CPU/CUDA or CUDA-major mismatch between torch and torchvision, or None.

    Like torchvision's own import check, only the major version must agree: CUDA minor versions are
    compatible (PyPI's torchvision 0.29.2 is built with CUDA 13.2 for torch 2.14.1's CUDA 13.0).
    """
    if (torch_cuda or None) is None or (tv_cuda or None) is None:
        if (torch_cuda or None) == (tv_cuda or None):
            return None
        return f"torchvision is built for CUDA {tv_cuda or 'none (CPU)'}, torch for CUDA {torch_cuda or 'none (CPU)'}"
    if (release(str(torch_cuda)) or (None,))[0] != (release(str(tv_cuda)) or (None,))[0]:
        return f"torchvision is built for CUDA {tv_cuda}, torch for CUDA {torch_cuda} (different major versions)"
    return None


def pairing_problem(torch_version: str, tv_version: str, pin: str | None) -> str | None:
    """Why this torchvision is not the one built for this torch, or None when they pair.

    torchvision's metadata may pin torch exactly (`torch==2.9.1`) or only bound it (`torch>=2.14.0`),
    so the release rule (torch 2.m pairs with torchvision 0.(m+15)) is checked as well.
    """
    base = public(torch_version)
    if pin and public(pin) != base:
        return f"torchvision {tv_version} was built for torch {pin}, but torch {torch_version} is installed"
    want = matching_torchvision(base)
    if want and (release(tv_version) or ())[:2] != release(want):
        return (f"torch {torch_version} pairs with torchvision {want}.x, but torchvision {tv_version} is "
                "installed (torch 2.m pairs with torchvision 0.(m+15))")
    return None


def _ops_problem(ops: Any, device: str) -> str | None:
    """Run nms and roi_align on inputs with known answers; the problem, or None when both are exact."""
    import torch

    boxes = torch.tensor([[0, 0, 10, 10], [1, 1, 10, 10], [20, 20, 30, 30]], dtype=torch.float32, device=device)
    try:
        keep = ops.nms(boxes, torch.tensor([0.9, 0.8, 0.7], device=device), iou_threshold=0.5).tolist()
        feats = torch.arange(16, dtype=torch.float32, device=device).reshape(1, 1, 4, 4)
        roi = torch.tensor([[0, 0, 0, 4, 4]], dtype=torch.float32, device=device)
        pooled = float(ops.roi_align(feats, roi, output_size=1, spatial_scale=1.0, sampling_ratio=2,
                                     aligned=False).item())
    except Exception as exc:
        return f"torchvision ops fail on {device}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
    if keep != [0, 2] or abs(pooled - 10.0) > 1e-5:
        return (f"torchvision ops give wrong answers on {device}: nms kept {keep} (want [0, 2]), "
                f"roi_align mean {pooled} (want 10.0)")
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
NOT_VERSIONS_FIX = ("torch and torchvision pair, so reinstalling will not help: look for what else changes them "
                    "here (a torch.library override of torchvision::*, a sitecustomize or .pth that patches "
                    "torch, LD_PRELOAD); the details show the error")


# What torchvision says when its C++ ops were built for another torch or CUDA than the one installed (a CUDA
# torchvision on a CPU torch fails with the first; torchvision's own hint names the third).
BUILD_MISMATCH = ("torchvision::nms does not exist", "undefined symbol", "couldn't load custom c++ ops",
                  "compiled with a different version", "was compiled against")


# Loading the ops library directly shows the loader's own reason, which torchvision's import hides behind
# "operator torchvision::nms does not exist": a CUDA torchvision on a CPU torch cannot find CUDA's runtime.
_CUDA_LIBRARY = re.compile(r"(lib(?:c10_cuda|torch_cuda|cudart|cublas\w*|cusparse|cufft|curand|cusolver|nvrtc|nvjpeg|nvToolsExt|"
                           r"nvJitLink)\.so[.\d]*): cannot open shared object file")


def build_mismatch(error: str) -> str | None:
    """The versions/build cause an import error names, or None when the error is about something else."""
    low = error.lower()
    if any(s in low for s in BUILD_MISMATCH):
        return "torchvision's C++ ops were built for another torch or CUDA than the one installed"
    missing = _CUDA_LIBRARY.search(error)
    if missing:
        return (f"torchvision's C++ ops need {missing.group(1)}, a CUDA library this torch does not have: a "
                "CUDA torchvision with a CPU-only torch, or one built for another CUDA major")
    return None


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

    def roi_align(self, feats: Any, rois: Any, output_size: int, spatial_scale: float, sampling_ratio: int,
                  aligned: bool) -> Any:
        import torch

        return torch.ops.torchvision.roi_align(feats, rois, spatial_scale, output_size, output_size,
                                               sampling_ratio, aligned)


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
            return failed(f"torchvision is not installed, but this image declares torchvision {want}", tv_fix,
                          expected={"torchvision": want}, fault_class="image")
        return skipped("torchvision is not installed and no envcheck image declares it (install it to check it: "
                       f"{fix_command(torch.__version__).split(' from ONE')[0]})")
    pin = _torch_pin(importlib.metadata.requires("torchvision") or [])
    return _Installed(tv_version, pin, tv_fix, want, {"torch": torch.__version__, "torchvision": tv_version,
                                                      "torch_cuda": torch.version.cuda,
                                                      "torchvision_requires_torch": pin})


def _import_failure(tv: _Installed, torch_version: str, exc: BaseException, what: str) -> Result:
    tv_version, pin, tv_fix, measured = tv.version, tv.pin, tv.fix, tv.measured
    chain: list[BaseException] = [exc]
    while (cause := chain[-1].__cause__ or chain[-1].__context__) is not None and len(chain) < 5:
        chain.append(cause)  # torch.ops.load_library says "Could not load this library"; the loader says why
    why = "; ".join(str(e).splitlines()[0] if str(e) else type(e).__name__ for e in chain)
    versions = pairing_problem(torch_version, tv_version, pin) or build_mismatch(why)
    if versions:
        return failed(f"torchvision {tv_version} {what} with torch {torch_version}: {why} ({versions})", tv_fix,
                      measured=measured, expected={"import": "ok"}, fault_class="image")
    # A half-done import leaves operators registered: a re-import in this worker would fail differently.
    return failed(f"torchvision {tv_version} {what}: {why} ({WORKER_RESTART})", NOT_VERSIONS_FIX,
                  measured=measured, expected={"import": "ok"}, fault_class="image",
                  details=traceback.format_exc(), restart_worker=True)


def _judge(ops: Any, tv: _Installed, tv_cuda: str | None, how: str) -> Result:
    """The verdict once torchvision's ops are loaded: CUDA pairing, then nms/roi_align exact on every device."""
    import torch

    tv_version, pin, tv_fix, want, measured = tv.version, tv.pin, tv.fix, tv.want, tv.measured
    measured["torchvision_cuda"] = tv_cuda
    cuda_problem = cuda_mismatch(torch.version.cuda, tv_cuda)
    if cuda_problem:
        return failed(cuda_problem, tv_fix, measured=measured, expected={"torchvision_cuda": torch.version.cuda},
                      fault_class="image")
    pairing = pairing_problem(torch.__version__, tv_version, pin)
    devices = ["cpu"] + ([f"cuda:{i}" for i in range(torch.cuda.device_count())]
                         if torch.cuda.is_available() else [])
    measured["devices"] = devices
    for device in devices:
        problem = _ops_problem(ops, device)
        if problem and device.startswith("cuda:"):
            from envcheck.checks.cuda.live_errors import gpu_label, sticky_cuda_error

            problem = problem.replace(f"on {device}", f"on {device} = {gpu_label(int(device[5:]))}", 1)
            if sticky_cuda_error(problem):
                problem += " (a sticky CUDA error: envcheck restarts the worker for later checks)"
        if problem and pairing:
            return failed(f"{problem}; {pairing}", tv_fix, measured=measured, fault_class="image")
        if problem and device.startswith("cuda:"):
            return failed(problem, "check dmesg for Xid errors on that GPU and run nvidia-smi -q -i <index>; "
                          + NOT_VERSIONS_FIX, measured=measured, fault_class="node")
        if problem:
            return failed(problem, NOT_VERSIONS_FIX, measured=measured, fault_class="image")
    if pairing:
        return warned(f"{pairing}; nms and roi_align happen to work, but this pair is unsupported",
                      tv_fix if want else pair_fix(torch.__version__, tv_version), measured=measured,
                      expected={"torchvision": matching_torchvision(torch.__version__)}, fault_class="image")
    return passed(f"torchvision {tv_version} matches torch {torch.__version__}; {how}; nms and roi_align exact on "
                  f"{', '.join(devices)}", measured=measured)


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
        code = int(torch.ops.torchvision._cuda_version())  # what torchvision.extension._check_cuda_version asks
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
    CheckSpec("vision.ops", vision_ops, "torchvision matches torch (version, CUDA); its C++ ops load; "
              "nms/roi_align exact", needs=Needs(torch=True), timeout_s=90),
    CheckSpec("vision.import", vision_import, "the whole torchvision package imports; torchvision.ops exact",
              level=Level.FULL, needs=Needs(torch=True), timeout_s=90, preload=("torchvision",)),
)
