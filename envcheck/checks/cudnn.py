"""cuDNN: the loaded library matches the compiled one, and a conv agrees with the CPU."""

from __future__ import annotations

import importlib.metadata
from typing import Any

from envcheck.checks.cuda.live_errors import gpu_error
from envcheck.core.check import CheckSpec, Context, Needs
from envcheck.core.result import FaultClass, Result, failed, passed, warned
from envcheck.core.versions import cudnn_numbers, pinned_with_prefix
from envcheck.reference.compare import scalar_measured

CONV_TOLERANCE = 1e-4  # max |cuda - cpu| / max |cpu|, float32 with TF32 off


def cudnn_pin(requires: list[str] | None = None) -> str | None:
    """The nvidia-cudnn requirement the torch wheel pins, e.g. `nvidia-cudnn-cu12==9.10.2.21`."""
    if requires is None:
        try:
            requires = importlib.metadata.requires("torch") or []
        except importlib.metadata.PackageNotFoundError:
            requires = []
    found = pinned_with_prefix(requires, "nvidia-cudnn-cu")
    return f"{found[0]}=={found[1]}" if found else None


def version_error_result(message: str, compiled: tuple[int, ...], pin: str | None) -> Result:
    """torch.backends.cudnn.version() raised: say which cuDNN is loaded vs compiled, or that the GPU is too old."""
    first = (message.strip().splitlines() or ["cuDNN could not be initialised"])[0]
    built = ".".join(map(str, compiled))
    measured = {"cudnn_compiled": built, "error": first}
    if "SM < 7.5" in message or "not compatible with devices" in message:
        return failed(
            f"cuDNN refuses this GPU: {first}",
            "cuDNN 9.11+ dropped GPUs older than sm_75 (Volta, Pascal): install a torch whose pinned "
            "cuDNN is <= 9.10 (e.g. torch 2.8 or older, or an older nvidia-cudnn-cu12 if the torch "
            "build allows it), or run on a Turing-or-newer GPU",
            measured=measured,
            fault_class=FaultClass.IMAGE,
        )
    target = pin or f"nvidia-cudnn-cu{torch_cuda_major()}=={built}.*"
    ld = " and remove other cuDNN copies from LD_LIBRARY_PATH" if "LD_LIBRARY_PATH" in message else ""
    return failed(
        f"cuDNN version mismatch: torch was built with cuDNN {built}, a different one is loaded ({first})",
        f"pip install {target}  # the cuDNN this torch was built against{ld}",
        measured=measured,
        expected={"cudnn": built},
        fault_class=FaultClass.CONFIG if ld else FaultClass.IMAGE,
    )


def torch_cuda_major() -> str:
    """'12' for a CUDA 12.x torch ('1X' when unknown)."""
    try:
        import torch

        return str(torch.version.cuda or "1X").split(".")[0]
    except ImportError:
        return "1X"


def cudnn_conv(ctx: Context) -> Result:
    """Loaded cuDNN equals compiled; conv2d forward and backward on CUDA match CPU."""
    import torch

    compiled = tuple(torch._C._cudnn.getCompileVersion())
    try:
        loaded_raw = torch.backends.cudnn.version()
    except RuntimeError as exc:  # torch raises for a mismatched runtime, and for cuDNN 9.11+ on < sm_75
        return version_error_result(str(exc), compiled, cudnn_pin())
    if loaded_raw is None:
        return failed(
            "cuDNN could not be loaded",
            "pip install --force-reinstall torch (it pins nvidia-cudnn)",
            fault_class=FaultClass.IMAGE,
        )
    loaded = cudnn_numbers(int(loaded_raw))
    measured: dict[str, object] = {
        "cudnn_compiled": ".".join(map(str, compiled)),
        "cudnn_loaded": ".".join(map(str, loaded)),
    }
    pin = cudnn_pin()
    fix = (
        f"pip install {pin}  # the cuDNN this torch pins"
        if pin
        else "pip install --force-reinstall torch  # restores the nvidia-cudnn version torch pins"
    )
    if loaded[0] != compiled[0]:
        return failed(
            f"cuDNN {measured['cudnn_loaded']} is loaded but torch was built with "
            f"{measured['cudnn_compiled']}",
            fix,
            measured=measured,
            fault_class=FaultClass.IMAGE,
        )
    torch.manual_seed(0)
    x = torch.randn(4, 8, 32, 32, dtype=torch.float32, requires_grad=True)
    w = torch.randn(16, 8, 3, 3, dtype=torch.float32, requires_grad=True)
    torch.nn.functional.conv2d(x, w, padding=1).square().sum().backward()
    ref = (x.grad, w.grad)
    prev = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    try:
        worst, worst_gpu = 0.0, 0
        out_ref = torch.nn.functional.conv2d(x.detach(), w.detach(), padding=1)
        for i in range(torch.cuda.device_count()):
            try:
                err = _conv_error(i, x, w, out_ref, ref)
            except Exception as exc:
                found = gpu_error(i, exc, "cuDNN conv2d failed")
                return failed(found.problem, found.fix, measured=measured, fault_class=found.fault_class)
            measured[f"gpu{i}_max_rel_error"] = err
            measured[f"conv2d fwd+bwd vs CPU@cuda:{i}/float32"] = scalar_measured(err, CONV_TOLERANCE)
            if err > worst:
                worst, worst_gpu = err, i
    finally:
        torch.backends.cudnn.allow_tf32 = prev
    measured["max_rel_error"] = worst
    if worst > CONV_TOLERANCE:
        from envcheck.checks.cuda.live_errors import gpu_label

        return failed(
            f"{gpu_label(worst_gpu)}: cuDNN conv2d differs from CPU by {worst:.2e} "
            f"(tolerance {CONV_TOLERANCE:g})",
            "a faulty GPU or a broken cuDNN: pip install --force-reinstall torch; check dmesg for Xid",
            measured=measured,
            expected={"max_rel_error": CONV_TOLERANCE},
            fault_class=FaultClass.NODE,
        )
    if loaded != compiled:
        return warned(
            f"cuDNN {measured['cudnn_loaded']} loaded, torch built with {measured['cudnn_compiled']} "
            "(same major, conv agrees with CPU)",
            fix,
            measured=measured,
            fault_class=FaultClass.IMAGE,
        )
    return passed(
        f"cuDNN {measured['cudnn_loaded']}; conv2d fwd+bwd matches CPU within {CONV_TOLERANCE:g}",
        measured=measured,
        expected={"max_rel_error": CONV_TOLERANCE},
    )


def _conv_error(i: int, x: Any, w: Any, out_ref: Any, ref: tuple[Any, Any]) -> float:
    """Max relative error of conv2d forward, dX and dW on cuda:i against the CPU results."""
    import torch

    xc = x.detach().to(f"cuda:{i}").requires_grad_()
    wc = w.detach().to(f"cuda:{i}").requires_grad_()
    out = torch.nn.functional.conv2d(xc, wc, padding=1)
    out.square().sum().backward()
    worst = 0.0
    for got, want in ((out, out_ref), (xc.grad, ref[0]), (wc.grad, ref[1])):
        assert got is not None and want is not None
        worst = max(worst, float((got.detach().cpu() - want).abs().max() / want.abs().max()))
    return worst


CHECKS = (
    CheckSpec(
        "cudnn.conv",
        cudnn_conv,
        "loaded cuDNN equals compiled; conv2d fwd+bwd on CUDA matches CPU",
        needs=Needs(torch=True, cuda=True),
        timeout_s=120,
    ),
)
