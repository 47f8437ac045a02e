"""Which torchvision is installed beside torch, and its compiled ops library, found without importing the package (whose
import costs about as much as torch's own: it pulls in torch._dynamo and torch.onnx): what vision.ops and vision.import
start from."""

from __future__ import annotations

import importlib.machinery
import importlib.metadata
import importlib.util
from dataclasses import dataclass
from typing import Any

from envcheck.checks.image import image_fix, read_declared
from envcheck.checks.vision_pairing import fix_command, torch_pin
from envcheck.core.result import FaultClass, Result, failed, skipped


def declared_torchvision() -> tuple[str | None, dict[str, Any] | None]:
    """The torchvision an envcheck image declares (None when none is declared), and the declaration."""
    try:
        declared = read_declared()
    except (OSError, ValueError):  # an unreadable declaration is image.versions' finding, not ours
        return None, None
    if not declared or not declared.get("torchvision"):
        return None, declared
    return str(declared["torchvision"]), declared


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
class Installed:
    """The torchvision found beside torch: its version, the torch it pins, the fix to offer, the image's
    declared torchvision (None outside an envcheck image), and what the result will carry."""

    version: str
    pin: str | None
    fix: str | None
    want: Any
    measured: dict[str, object]


def installed() -> Installed | Result:
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
    return Installed(
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
