"""Load one of PyTorch's own test databases (torch.testing._internal.*: common_modules.module_db,
common_optimizers.optim_db) the way ops.opdb loads op_db: pinned to the torch versions the caller names (the checks
pass opdb.PINNED, the matrix's versions), with a stand-in for the test-only `expecttest` package, and torch.backends'
flags unfrozen afterwards. Internal API: anything unexpected is a reason to skip, never a crash."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from typing import Any


def load_internal(module: str, attribute: str, pinned: Sequence[str]) -> tuple[Any | None, str]:
    """torch.testing._internal.<module>.<attribute>, or None and why not."""
    import torch

    version = ".".join(torch.__version__.split(".")[:2])
    if version not in pinned:
        return None, (
            f"{module}.{attribute} is internal API, pinned to torch {', '.join(pinned)}; "
            f"this is torch {torch.__version__}"
        )
    if "expecttest" not in sys.modules:
        try:
            import expecttest  # type: ignore[import-not-found]  # noqa: F401
        except ImportError:
            import types
            import unittest

            stand_in = types.ModuleType("expecttest")
            stand_in.TestCase = unittest.TestCase  # type: ignore[attr-defined]
            sys.modules["expecttest"] = stand_in
    try:
        value = getattr(importlib.import_module(f"torch.testing._internal.{module}"), attribute)
    except Exception as exc:  # internal API: any failure to import is a skip with its reason
        return None, f"torch.testing._internal.{module} did not import: {exc!r}"[:300]
    # common_utils freezes torch.backends flags for its test runner (disable_global_flags); undo that here.
    flags = getattr(getattr(torch.backends, "flags_frozen", None), "__globals__", {})
    if "__allow_nonbracketed_mutation_flag" in flags:
        flags["__allow_nonbracketed_mutation_flag"] = True
    return value, ""
