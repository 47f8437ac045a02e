"""What a corpus entry is: a cited mechanism, its injector, its harm script, the check that must catch it."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

import torch

PT = "https://github.com/pytorch/pytorch"


@dataclass(frozen=True)
class Mechanism:
    """One injected bug: where it came from, how to inject it, how it harms training, who must catch it."""

    name: str
    source: str
    inject: Callable[[], AbstractContextManager[None]]
    script: Callable[[], torch.Tensor]
    check: str


def _m(
    name: str,
    source: str,
    inject: Callable[[], AbstractContextManager[None]],
    script: Callable[[], torch.Tensor],
    check: str,
) -> Mechanism:
    return Mechanism(name, source, inject, script, check)
