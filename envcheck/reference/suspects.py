"""Why gradients or math come out wrong, before blaming the install: the usual causes, looked for one by one.

A wrong result from a healthy wheel nearly always has a local cause: an operator kernel replaced through
`torch.library` (the dispatcher records where each kernel was registered), a `sitecustomize` or `.pth` file that
patches torch at interpreter start, or an environment variable that changes the math. Only when none is found is
"reinstall torch" the fix, and then only as the last thing to try.
"""

from __future__ import annotations

import importlib.util
import os
import re
import site
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from envcheck.core.result import FaultClass

# Operators the numerics checks lean on; a kernel for them registered from Python outside torch is an override.
WATCHED_OPS = (
    "aten::mm",
    "aten::addmm",
    "aten::bmm",
    "aten::matmul",
    "aten::linear",
    "aten::convolution",
    "aten::_softmax",
    "aten::sum.dim_IntList",
    "aten::mul.Tensor",
    "aten::add.Tensor",
    "aten::t",
    "aten::mm.out",
)
# Variables that change what float math computes (or which library computes it).
MATH_ENV = {
    "NVIDIA_TF32_OVERRIDE": "forces TF32 in cuBLAS/cuDNN whatever torch asks",
    "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": "lets cuBLAS use TF32 for float32 matmuls",
    "MKL_CBWR": "changes MKL's code path (and its rounding)",
    "LD_PRELOAD": "replaces library functions (BLAS, libm) in this process",
}
_REGISTERED = re.compile(r"^\s*([\w\[\]]+(?:\[alias\])?): registered at (\S+?\.py):(\d+)")


@dataclass(frozen=True)
class Suspect:
    """One local cause of wrong math: what was found, and who must act (config or image)."""

    cause: str
    fault_class: FaultClass


def library_overrides(ops: tuple[str, ...] = WATCHED_OPS) -> list[Suspect]:
    """Kernels of watched operators that Python code outside torch registered (torch.library overrides)."""
    import torch

    torch_dir = str(Path(torch.__file__).resolve().parent)
    found: list[Suspect] = []
    for op in ops:
        try:
            dump = torch._C._dispatch_dump(op)
        except Exception:  # an operator this torch does not have
            continue
        for line in dump.splitlines():
            m = _REGISTERED.match(line)
            if m and "(inactive)" not in line and not str(Path(m.group(2)).resolve()).startswith(torch_dir):
                found.append(
                    Suspect(
                        f"{op} has a {m.group(1)} kernel registered from {m.group(2)}:{m.group(3)} "
                        "(a torch.library override)",
                        FaultClass.IMAGE,
                    )
                )
    return found


def startup_patches() -> list[Suspect]:
    """A sitecustomize/usercustomize module or a .pth file that imports or patches torch at interpreter start."""
    found: list[Suspect] = []
    for name in ("sitecustomize", "usercustomize"):
        spec = importlib.util.find_spec(name) if name not in sys.modules else sys.modules[name].__spec__
        origin = getattr(spec, "origin", None)
        if origin and os.path.isfile(origin) and TORCH_WORD.search(_read(origin)):
            found.append(
                Suspect(
                    f"{origin} ({name}) mentions torch and runs at every interpreter start", FaultClass.IMAGE
                )
            )
    dirs = [*site.getsitepackages(), site.getusersitepackages()]
    for folder in dict.fromkeys(dirs):
        for pth in sorted(Path(folder).glob("*.pth")) if os.path.isdir(folder) else []:
            lines = [ln for ln in _read(str(pth)).splitlines() if ln.startswith(("import ", "import\t"))]
            if any(TORCH_WORD.search(ln) for ln in lines):
                found.append(
                    Suspect(
                        f"{pth} runs code that touches torch at every interpreter start", FaultClass.IMAGE
                    )
                )
    return found


# torch itself (`import torch`, `torch.mm = ...`), not names that merely contain it, such as the editable
# finder `__editable___torch_envcheck_0_1_0_finder` that `pip install -e` writes into a .pth file
TORCH_WORD = re.compile(r"(?<![\w.])torch(?![\w])")


def math_env(environ: Mapping[str, str] | None = None) -> list[Suspect]:
    """Set environment variables that change the math."""
    env = os.environ if environ is None else environ
    return [
        Suspect(f"{name}={env[name]!r} is set: it {why}", FaultClass.CONFIG)
        for name, why in MATH_ENV.items()
        if env.get(name)
    ]


def find_suspects() -> list[Suspect]:
    """Every local cause of wrong math found here, overrides first."""
    return [*library_overrides(), *startup_patches(), *math_env()]


def wrong_math_fix(default: str, suspects: list[Suspect] | None = None) -> tuple[str, str, list[str]]:
    """(fix, fault class, causes) for wrong numbers: the causes found, or `default` when none is found."""
    found = find_suspects() if suspects is None else suspects
    if not found:
        return (
            f"no torch.library override, startup patch or math-changing env var was found; {default}",
            FaultClass.IMAGE,
            [],
        )
    causes = [s.cause for s in found]
    fix = "remove what changes torch's math here, then rerun: " + "; ".join(causes)
    return fix, found[0].fault_class, causes


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read(200_000)
    except OSError:
        return ""
