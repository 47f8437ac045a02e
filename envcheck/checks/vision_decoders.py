"""vision.decoders: torchvision's image decoders, as torchvision's release smoke test checks them
(pytorch/vision test/smoke_test.py: "Torchvision wasn't compiled against libjpeg-turbo", decode_image of a JPEG, a
PNG and a WebP, decode_jpeg on CUDA): libjpeg-turbo compiled in, PNG and WebP decoded exactly, JPEG within its loss,
and nvJPEG on each GPU agreeing with the CPU. The images are made here (a PNG and JPEG by torchvision's encoders,
a lossless WebP by Pillow, which torchvision depends on), so nothing is downloaded.

The real-world break: torchvision's image extension does not load ("Failed to load image Python extension: ...
undefined symbol" / "libjpeg.so.8: cannot open shared object file", torchvision/io/image.py's warning): import
works, every decode raises."""

from __future__ import annotations

import io
from typing import Any

from envcheck.checks.vision_pairing import fix_command
from envcheck.core.check import CheckSpec, Context, Level, Needs
from envcheck.core.result import FaultClass, Result, failed, passed, skipped, warned

# Finding codes this module emits (each one is in envcheck.cluster.finding_codes.TABLE).
DECODE_WRONG = "vision.decode_wrong"
DECODERS_MISSING = "vision.decoders_missing"
NO_TURBO = "vision.no_turbo"

JPEG_MEAN_ERROR = 4.0  # mean |decoded - original| over a smooth 64x48 gradient at quality 95 (measured: ~0.5)
NVJPEG_MEAN_ERROR = 2.0  # nvJPEG vs libjpeg-turbo on the same bytes: IDCT rounding differs by a level or two


def picture() -> Any:
    """A smooth 3x48x64 uint8 image (JPEG's loss stays small on gradients)."""
    import torch

    y, x = torch.meshgrid(torch.arange(48), torch.arange(64), indexing="ij")
    return torch.stack([x * 4, y * 5, (x + y) * 2]).clamp(0, 255).to(torch.uint8)


def webp_bytes(img: Any) -> bytes | None:
    """`img` as a lossless WebP made by Pillow (None when this Pillow has no WebP encoder)."""
    from PIL import Image, features

    if not features.check("webp"):
        return None
    buf = io.BytesIO()
    Image.fromarray(img.permute(1, 2, 0).contiguous().numpy()).save(buf, format="WEBP", lossless=True)
    return buf.getvalue()


def decode_all(gpus: int) -> dict[str, Any]:
    """Every decoder on the made images; raises what torchvision raises."""
    import torch
    from torchvision.io import decode_jpeg, decode_png, decode_webp, encode_jpeg, encode_png

    img = picture()
    out: dict[str, Any] = {
        "turbo": bool(torch.ops.image._is_compiled_against_turbo())
        if hasattr(torch.ops.image, "_is_compiled_against_turbo")
        else None
    }
    out["png_exact"] = bool(torch.equal(decode_png(encode_png(img)), img))
    jpeg = encode_jpeg(img, quality=95)
    cpu = decode_jpeg(jpeg)
    out["jpeg_mean_error"] = round(float((cpu.int() - img.int()).abs().float().mean()), 3)
    webp = webp_bytes(img)
    out["webp_exact"] = (
        None
        if webp is None
        else bool(torch.equal(decode_webp(torch.frombuffer(bytearray(webp), dtype=torch.uint8)), img))
    )
    out["nvjpeg_mean_error"] = {}
    for i in range(gpus):
        got = decode_jpeg(jpeg, device=f"cuda:{i}").cpu()
        out["nvjpeg_mean_error"][f"cuda:{i}"] = round(float((got.int() - cpu.int()).abs().float().mean()), 3)
    return out


def decoders_verdict(tv_version: str, torch_version: str, got: dict[str, Any] | str) -> Result:
    """Pure: decode_all()'s figures, or the error text of the first decoder that raised."""
    fix = fix_command(torch_version)
    if isinstance(got, str):
        return failed(
            f"torchvision {tv_version} cannot decode images: {got.splitlines()[0][:200]}",
            fix + " (its image extension, torchvision/image.so, and its bundled libjpeg/libpng/libwebp "
            "come with the wheel)",
            fault_class=FaultClass.IMAGE,
            code=DECODERS_MISSING,
            details=got,
        )
    wrong = [
        what
        for what, bad in (
            ("PNG", got["png_exact"] is False),
            ("WebP", got["webp_exact"] is False),
            ("JPEG", got["jpeg_mean_error"] > JPEG_MEAN_ERROR),
        )
        if bad
    ]
    wrong += [f"nvJPEG on {d}" for d, e in got["nvjpeg_mean_error"].items() if e > NVJPEG_MEAN_ERROR]
    if wrong:
        return failed(
            f"torchvision {tv_version} decodes {', '.join(wrong)} wrong (JPEG mean error "
            f"{got['jpeg_mean_error']}, nvJPEG {got['nvjpeg_mean_error'] or '-'})",
            fix,
            fault_class=FaultClass.IMAGE,
            code=DECODE_WRONG,
            measured=got,
        )
    if got["turbo"] is False:
        return warned(
            f"torchvision {tv_version} was not compiled against libjpeg-turbo: JPEG decoding is several "
            "times slower (torchvision's release smoke test refuses such a build)",
            fix,
            fault_class=FaultClass.IMAGE,
            code=NO_TURBO,
            measured=got,
        )
    done = ["JPEG (libjpeg-turbo)" if got["turbo"] else "JPEG", "PNG"] + (
        ["WebP"] if got["webp_exact"] else []
    )
    gpus = f"; nvJPEG on {len(got['nvjpeg_mean_error'])} GPU(s)" if got["nvjpeg_mean_error"] else ""
    no_webp = "; WebP not tried: this Pillow has no WebP encoder" if got["webp_exact"] is None else ""
    return passed(f"torchvision {tv_version} decodes {', '.join(done)}{gpus}{no_webp}", measured=got)


def vision_decoders(ctx: Context) -> Result:
    """torchvision decodes JPEG, PNG and WebP (and JPEG with nvJPEG on each GPU)."""
    import importlib.util

    import torch

    if importlib.util.find_spec("torchvision") is None:
        return skipped("torchvision is not installed")
    import torchvision

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    try:
        got: dict[str, Any] | str = decode_all(gpus)
    except Exception as exc:
        got = f"{type(exc).__name__}: {exc}"
    return decoders_verdict(torchvision.__version__, torch.__version__, got)


# Full level, beside vision.import: torchvision.io needs the whole package, whose import pulls in torch._dynamo
# (~1.4-2.3 s measured in the runtime image), which the quick run must not pay (vision.ops loads only the ops library).
CHECKS = (
    CheckSpec(
        "vision.decoders",
        vision_decoders,
        "torchvision decodes JPEG (libjpeg-turbo), PNG, WebP; nvJPEG on each GPU",
        Level.FULL,
        Needs(torch=True),
        timeout_s=60,
        preload=("torchvision",),
    ),
)
