"""numpy.interop: torch and numpy exchange arrays, as PyTorch's release smoke test's test_numpy does
(`torch.tensor(np.arange(5))`), plus the two directions user code relies on (torch.from_numpy, Tensor.numpy()).

The classic break: a torch built against NumPy 1.x with NumPy 2 installed ("A module that was compiled using NumPy 1.x
cannot be run in NumPy 2.0.0 as it may crash", then "UserWarning: Failed to initialize NumPy: _ARRAY_API not found"
and, on first use, "RuntimeError: Numpy is not available": pytorch/pytorch#132179, "PyTorch 2.3.0 is the first
version that supports NumPy 2.0"; securefederatedai/openfederatedlearning#999 with torch 2.2.2). torch imports fine
and the failure waits for the first DataLoader or .numpy() call.
"""

from __future__ import annotations

from typing import Any

from envcheck.core.check import CheckSpec, Context, Needs
from envcheck.core.result import FaultClass, Result, failed, passed, warned
from envcheck.core.versions import public, release

# Finding codes this module emits (each one is in envcheck.cluster.finding_codes.TABLE).
ABI_MISMATCH = "numpy.abi_mismatch"
MISSING = "numpy.missing"
WRONG_VALUES = "numpy.wrong_values"


def exchange() -> dict[str, Any]:
    """The three conversions; raises what torch raises."""
    import numpy as np
    import torch

    c = torch.arange(4, dtype=torch.float64).numpy()  # first: torch's own check ("Numpy is not available")
    a = torch.tensor(np.arange(5))  # the smoke test's own line
    b = torch.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
    ok = a.tolist() == [0, 1, 2, 3, 4] and b.sum().item() == 15.0 and c.tolist() == [0.0, 1.0, 2.0, 3.0]
    return {
        "numpy": np.__version__,
        "values_ok": ok,
        "shared_memory": bool(np.shares_memory(b.numpy(), b.numpy())),
    }


def numpy_fix(torch_version: str, numpy_version: str | None, text: str) -> str:
    """numpy<2 for a torch older than 2.3 with NumPy 2, else a torch/numpy reinstall from one resolver run."""
    old_torch = tuple((release(torch_version) or (9, 9))[:2]) < (2, 3)
    if old_torch and numpy_version and numpy_version.startswith("2"):
        return (
            f"pip install 'numpy<2' (torch {public(torch_version)} was built against NumPy 1.x; NumPy 2 needs "
            "torch >= 2.3), or upgrade torch"
        )
    return (
        f"pip install --force-reinstall numpy torch=={public(torch_version)} in one command, so pip picks a "
        f"numpy this torch supports ({text.splitlines()[0][:120] if text else 'see details'})"
    )


def interop_verdict(
    torch_version: str, numpy_version: str | None, got: dict[str, Any] | str | None
) -> Result:
    """Pure: `got` is exchange()'s result, the error text, or None when numpy is not installed."""
    if numpy_version is None:
        return warned(
            "numpy is not installed: torch works, but torch.from_numpy, Tensor.numpy() and every "
            "library that hands torch numpy arrays (DataLoader pipelines, torchvision transforms) fail",
            f"pip install numpy (a version torch {public(torch_version)} supports)",
            fault_class=FaultClass.IMAGE,
            code=MISSING,
            measured={"numpy": None},
        )
    if isinstance(got, str) or got is None:
        text = got or "no result"
        return failed(
            f"torch {public(torch_version)} cannot exchange arrays with numpy {numpy_version}: "
            f"{text.splitlines()[0][:200]}",
            numpy_fix(torch_version, numpy_version, text),
            fault_class=FaultClass.IMAGE,
            code=ABI_MISMATCH,
            details=text,
            measured={"numpy": numpy_version, "error": text.splitlines()[0][:300]},
        )
    if not got["values_ok"]:
        return failed(
            f"torch and numpy {numpy_version} exchange arrays with wrong values",
            numpy_fix(torch_version, numpy_version, ""),
            fault_class=FaultClass.IMAGE,
            code=WRONG_VALUES,
            measured=got,
        )
    return passed(
        f"torch {public(torch_version)} and numpy {numpy_version} exchange arrays (tensor(), from_numpy, "
        ".numpy())",
        measured=got,
    )


def numpy_interop(ctx: Context) -> Result:
    """torch <-> numpy conversions work, or the numpy/torch pairing that breaks them is named."""
    import traceback

    try:
        import torch
    except Exception as exc:  # a numpy torch was not built for can break `import torch` itself
        if "numpy" not in "".join(traceback.format_exception(exc)).lower():
            raise
        return interop_verdict(
            _installed_torch(), _installed("numpy"), f"import torch: {type(exc).__name__}: {exc}"
        )
    version = _installed("numpy")
    if version is None:
        return interop_verdict(torch.__version__, None, None)
    try:
        got: dict[str, Any] | str = exchange()
    except Exception as exc:  # RuntimeError: Numpy is not available; ImportError from a broken numpy
        got = f"{type(exc).__name__}: {exc}"
    return interop_verdict(torch.__version__, version, got)


def _installed(name: str) -> str | None:
    import importlib.metadata

    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _installed_torch() -> str:
    return _installed("torch") or "?"


CHECKS = (
    CheckSpec(
        "numpy.interop",
        numpy_interop,
        "torch and numpy exchange arrays (tensor(np...), from_numpy, .numpy())",
        needs=Needs(torch=True),
        timeout_s=30,
    ),
)
