"""Load one of PyTorch's own test databases (torch.testing._internal.*: common_modules.module_db,
common_optimizers.optim_db) the way ops.opdb loads op_db: pinned to the torch versions the caller names (the checks
pass opdb.PINNED, the matrix's versions), with a stand-in for the test-only `expecttest` package, and torch.backends'
flags left as they were, whether the import succeeds or fails. Internal API: anything unexpected is a reason to skip, never a crash."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from typing import Any

from envcheck.core.hardening import runtime_cause


def load_internal(
    module: str, attribute: str, pinned: Sequence[str], environment_raises: bool = False
) -> tuple[Any | None, str]:
    """torch.testing._internal.<module>.<attribute>, or None and why not. With `environment_raises`, an import that a
    hardened runtime broke (a read-only temp dir: envcheck.core.hardening) raises instead: for a caller whose own work
    needs the same imports (an optimizer imports torch._dynamo), which would otherwise meet them half-imported."""
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
    # common_utils freezes torch.backends flags for its test runner at import (disable_global_flags), and an import
    # that fails after that line (a read-only temp dir: "No usable temporary directory") leaves them frozen too: the
    # caller's next `torch.backends.cudnn.allow_tf32 = ...` then raises (the hardened proof's modules.train_eval
    # ERROR). Whatever the import does, the flags are left as they were.
    flags = getattr(getattr(torch.backends, "flags_frozen", None), "__globals__", {})
    was = flags.get("__allow_nonbracketed_mutation_flag")
    try:
        value = getattr(importlib.import_module(f"torch.testing._internal.{module}"), attribute)
    except Exception as exc:  # internal API: any failure to import is a skip with its reason
        if environment_raises and runtime_cause(exc) is not None:
            raise
        return None, f"torch.testing._internal.{module} did not import: {exc!r}"[:300]
    finally:
        if was is not None:
            flags["__allow_nonbracketed_mutation_flag"] = was
    return value, ""
