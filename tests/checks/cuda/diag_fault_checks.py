"""Checks with injected faults for the diagnosis tests; the worker imports them by module path."""

from __future__ import annotations

import os

from envcheck.core.check import Context
from envcheck.core.result import Result, passed

OP = "envcheck_diag_test::twice"


def crashes_half_way(ctx: Context) -> Result:
    """Registers an operator, then crashes: as an import that dies half way leaves torchvision's ops behind."""
    import torch

    lib = torch.library.Library("envcheck_diag_test", "DEF")
    lib.define("twice(Tensor x) -> Tensor")
    _KEEP.append(lib)
    raise RuntimeError("half-way crash after registering " + OP)


def registers_the_same_operator(ctx: Context) -> Result:
    """Healthy in a fresh process; in the crashed one, torch refuses to register the operator a second time."""
    import torch

    lib = torch.library.Library("envcheck_diag_test", "DEF")
    lib.define("twice(Tensor x) -> Tensor")
    _KEEP.append(lib)
    return passed("registered", measured={"pid": os.getpid()})


_KEEP: list[object] = []
