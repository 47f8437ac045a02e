"""torchvision: installed, built for this torch and its CUDA, and its C++ ops registered and correct."""

from __future__ import annotations

import importlib.metadata
import re
from typing import Any

from envcheck.core.check import CheckSpec, Context, Needs
from envcheck.core.result import Result, failed, passed, warned


def matching_torchvision(torch_version: str) -> str | None:
    """The torchvision minor that pairs with a torch release (2.8 -> 0.23, 2.13 -> 0.28)."""
    m = re.match(r"2\.(\d+)", torch_version)
    return f"0.{int(m.group(1)) + 15}" if m else None


def fix_command(torch_version: str) -> str:
    """The concrete reinstall that makes torch and torchvision match."""
    base = torch_version.split("+")[0]
    tv = matching_torchvision(base)
    pair = f"torch=={base} torchvision=={tv}.*" if tv else "torch torchvision"
    return (f"pip install --force-reinstall {pair} from ONE index (PyPI's CUDA wheels, or e.g. "
            "--index-url https://download.pytorch.org/whl/cu128); a CUDA torchvision never works with a CPU torch")


def cuda_text(value: object) -> str | None:
    """torchvision >= 0.26 reports its CUDA as an int (13000); older ones as text ('12.8')."""
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value // 1000}.{value % 1000 // 10}"
    return None if value is None else str(value)


def pair_fix(torch_version: str, tv_version: str) -> str:
    """Both ways to make an unsupported pair match: the torch this torchvision was built for, or the reverse."""
    m = re.match(r"0\.(\d+)", tv_version)
    back = f"pip install --force-reinstall torch==2.{int(m.group(1)) - 15}.* torchvision=={tv_version}" if m else ""
    return (f"{back} (the torch this torchvision was built for), or " if back else "") + fix_command(torch_version)


def _torch_pin(requires: list[str]) -> str | None:
    for req in requires:
        m = re.match(r"torch\s*==\s*([\w.+]+)", req)
        if m:
            return m.group(1)
    return None


def cuda_mismatch(torch_cuda: str | None, tv_cuda: str | None) -> str | None:
    """A CPU/CUDA or CUDA-major mismatch between torch and torchvision, or None.

    Like torchvision's own import check, only the major version must agree: CUDA minor versions are
    compatible (PyPI's torchvision 0.29.2 is built with CUDA 13.2 for torch 2.14.1's CUDA 13.0).
    """
    if (torch_cuda or None) is None or (tv_cuda or None) is None:
        if (torch_cuda or None) == (tv_cuda or None):
            return None
        return f"torchvision is built for CUDA {tv_cuda or 'none (CPU)'}, torch for CUDA {torch_cuda or 'none (CPU)'}"
    if str(torch_cuda).split(".")[0] != str(tv_cuda).split(".")[0]:
        return f"torchvision is built for CUDA {tv_cuda}, torch for CUDA {torch_cuda} (different major versions)"
    return None


def pairing_problem(torch_version: str, tv_version: str, pin: str | None) -> str | None:
    """Why this torchvision is not the one built for this torch, or None when they pair.

    torchvision's metadata may pin torch exactly (`torch==2.9.1`) or only bound it (`torch>=2.14.0`),
    so the release rule (torch 2.m pairs with torchvision 0.(m+15)) is checked as well.
    """
    base = torch_version.split("+")[0]
    if pin and pin.split("+")[0] != base:
        return f"torchvision {tv_version} was built for torch {pin}, but torch {torch_version} is installed"
    want = matching_torchvision(base)
    if want and not tv_version.startswith(want + "."):
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


def vision_ops(ctx: Context) -> Result:
    """torchvision imports, matches torch's version and CUDA, and nms/roi_align give exact answers."""
    import torch

    tv_fix = fix_command(torch.__version__)
    try:
        tv_version = importlib.metadata.version("torchvision")
    except importlib.metadata.PackageNotFoundError:
        return failed("torchvision is not installed", tv_fix)
    measured: dict[str, object] = {"torch": torch.__version__, "torchvision": tv_version,
                                   "torch_cuda": torch.version.cuda}
    pin = _torch_pin(importlib.metadata.requires("torchvision") or [])
    measured["torchvision_requires_torch"] = pin
    try:
        import torchvision
        from torchvision import ops
    except Exception as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return failed(f"torchvision {tv_version} does not import with torch {torch.__version__}: {why}", tv_fix,
                      measured=measured, expected={"import": "ok"})
    tv_cuda = cuda_text(torchvision.version.cuda)
    measured["torchvision_cuda"] = tv_cuda
    cuda_problem = cuda_mismatch(torch.version.cuda, tv_cuda)
    if cuda_problem:
        return failed(cuda_problem, tv_fix, measured=measured, expected={"torchvision_cuda": torch.version.cuda})
    pairing = pairing_problem(torch.__version__, tv_version, pin)
    devices = ["cpu"] + ([f"cuda:{i}" for i in range(torch.cuda.device_count())]
                         if torch.cuda.is_available() else [])
    measured["devices"] = devices
    for device in devices:
        problem = _ops_problem(ops, device)
        if problem and device.startswith("cuda:"):
            from envcheck.checks.cuda_diagnosis import gpu_label, sticky_cuda_error

            problem = problem.replace(f"on {device}", f"on {device} = {gpu_label(int(device[5:]))}", 1)
            if sticky_cuda_error(problem):
                problem += " (a sticky CUDA error: envcheck restarts the worker for later checks)"
        if problem:
            return failed(problem + (f"; {pairing}" if pairing else ""), tv_fix, measured=measured)
    if pairing:
        return warned(f"{pairing}; nms and roi_align happen to work, but this pair is unsupported",
                      pair_fix(torch.__version__, tv_version),
                      measured=measured, expected={"torchvision": matching_torchvision(torch.__version__)})
    return passed(f"torchvision {tv_version} matches torch {torch.__version__}; nms and roi_align exact on "
                  f"{', '.join(devices)}", measured=measured)


CHECKS = (
    CheckSpec("vision.ops", vision_ops, "torchvision matches torch (version, CUDA); nms/roi_align exact",
              needs=Needs(torch=True), timeout_s=90, preload=("torchvision",)),
)
