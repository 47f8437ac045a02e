"""cuDNN: the loaded library matches the compiled one, and a conv agrees with the CPU."""

from __future__ import annotations

from envcheck.core.check import CheckSpec, Context, Needs
from envcheck.core.result import Result, failed, passed, warned

CONV_TOLERANCE = 1e-4  # max |cuda - cpu| / max |cpu|, float32 with TF32 off


def _split(version: int) -> tuple[int, int, int]:
    major, rest = divmod(version, 10000) if version >= 90000 else divmod(version, 1000)
    return major, rest // 100, rest % 100


def cudnn_conv(ctx: Context) -> Result:
    """Loaded cuDNN equals compiled; conv2d forward and backward on CUDA match CPU."""
    import torch

    compiled = tuple(torch._C._cudnn.getCompileVersion())
    loaded_raw = torch.backends.cudnn.version()
    if loaded_raw is None:
        return failed("cuDNN could not be loaded", "pip install --force-reinstall torch (it pins nvidia-cudnn)")
    loaded = _split(int(loaded_raw))
    measured: dict[str, object] = {"cudnn_compiled": ".".join(map(str, compiled)),
                                   "cudnn_loaded": ".".join(map(str, loaded))}
    fix = "pip install --force-reinstall torch  # restores the nvidia-cudnn version torch pins"
    if loaded[0] != compiled[0]:
        return failed(f"cuDNN {measured['cudnn_loaded']} is loaded but torch was built with "
                      f"{measured['cudnn_compiled']}", fix, measured=measured)
    torch.manual_seed(0)
    x = torch.randn(4, 8, 32, 32, dtype=torch.float32, requires_grad=True)
    w = torch.randn(16, 8, 3, 3, dtype=torch.float32, requires_grad=True)
    torch.nn.functional.conv2d(x, w, padding=1).square().sum().backward()
    ref = (x.grad, w.grad)
    prev = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    try:
        worst = 0.0
        for i in range(torch.cuda.device_count()):
            xc = x.detach().to(f"cuda:{i}").requires_grad_()
            wc = w.detach().to(f"cuda:{i}").requires_grad_()
            out = torch.nn.functional.conv2d(xc, wc, padding=1)
            out_ref = torch.nn.functional.conv2d(x.detach(), w.detach(), padding=1)
            out.square().sum().backward()
            for got, want in ((out, out_ref), (xc.grad, ref[0]), (wc.grad, ref[1])):
                assert got is not None and want is not None
                err = float((got.detach().cpu() - want).abs().max() / want.abs().max())
                worst = max(worst, err)
    finally:
        torch.backends.cudnn.allow_tf32 = prev
    measured["max_rel_error"] = worst
    if worst > CONV_TOLERANCE:
        return failed(f"cuDNN conv2d differs from CPU by {worst:.2e} (tolerance {CONV_TOLERANCE:g})",
                      "a faulty GPU or a broken cuDNN: pip install --force-reinstall torch; check dmesg for Xid",
                      measured=measured, expected={"max_rel_error": CONV_TOLERANCE})
    if loaded != compiled:
        return warned(f"cuDNN {measured['cudnn_loaded']} loaded, torch built with {measured['cudnn_compiled']} "
                      "(same major, conv agrees with CPU)", fix, measured=measured)
    return passed(f"cuDNN {measured['cudnn_loaded']}; conv2d fwd+bwd matches CPU within {CONV_TOLERANCE:g}",
                  measured=measured, expected={"max_rel_error": CONV_TOLERANCE})


CHECKS = (
    CheckSpec("cudnn.conv", cudnn_conv, "loaded cuDNN equals compiled; conv2d fwd+bwd on CUDA matches CPU",
              needs=Needs(torch=True, cuda=True), timeout_s=120),
)
