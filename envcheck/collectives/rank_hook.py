"""An extension point inside each rank: ENVCHECK_RANK_HOOK=`/path/file.py:function` names a callable that every
rank calls as `hook(step, rank, contribution)` just before a collective. Unset in real runs;
the test suite uses it to inject faults (tests/helpers/rank_faults.py), so no fault injection ships in the package."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable
from typing import Any

HOOK_VAR = "ENVCHECK_RANK_HOOK"
RankHook = Callable[[str, int, Any], None]


def load_rank_hook(spec: str | None = None, var: str = HOOK_VAR) -> RankHook | None:
    """The callable ENVCHECK_RANK_HOOK (or another extension point's variable, `var`) names, or None when it is
    unset; ValueError naming a bad value."""
    spec = os.environ.get(var) if spec is None else spec
    if not spec:
        return None
    where, _, name = spec.rpartition(":")
    try:
        if not where.endswith(
            ".py"
        ):  # a file, never a module name to import (no computed import in the package)
            raise ValueError(f"{where!r} is not a .py file")
        loader = importlib.util.spec_from_file_location("envcheck_rank_hook", where)
        if loader is None or loader.loader is None:
            raise ImportError(f"cannot load {where}")
        module = importlib.util.module_from_spec(loader)
        sys.modules[loader.name] = module  # dataclasses look their module up there
        loader.loader.exec_module(module)
        hook = getattr(module, name)
    except (ImportError, AttributeError, OSError, ValueError) as exc:
        raise ValueError(f"{var}={spec!r} names no callable: {exc}") from None
    if not callable(hook):
        raise ValueError(f"{var}={spec!r} is not callable")
    hooked: RankHook = hook
    return hooked
