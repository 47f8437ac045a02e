"""Fault injection for ranks, read from ENVCHECK_TEST_FAULT: a rank hook (envcheck.collectives.rank_hook) that the
tests name in ENVCHECK_RANK_HOOK (`RANK_HOOK` below), so none of it ships in the package.

Format: `rank=R:KIND` with KIND one of `corrupt` (add 1 to every CORRUPT_STRIDE-th element of the
float32 all-reduce input), `exit` (exit with code 3 as the all-reduce starts) or `hang` (sleep forever
as the all-reduce starts). The rank's other collectives are untouched.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

ENV_VAR = "ENVCHECK_TEST_FAULT"
KINDS = ("corrupt", "exit", "hang")
CORRUPT_STRIDE = 97
EXIT_CODE = 3


@dataclass(frozen=True)
class Fault:
    """One injected fault: which rank misbehaves and how."""

    rank: int
    kind: str


def parse_fault(text: str | None) -> Fault | None:
    """Parse `rank=R:KIND`; empty means no fault; anything malformed raises ValueError."""
    if not text:
        return None
    head, _, kind = text.partition(":")
    key, _, value = head.partition("=")
    if key.strip() != "rank" or not value.strip().isdigit() or kind not in KINDS:
        raise ValueError(f"{ENV_VAR}={text!r} is not of the form rank=N:{'|'.join(KINDS)}")
    return Fault(int(value), kind)


def fault_from_env() -> Fault | None:
    """The fault named by the test-only environment variable, if any."""
    return parse_fault(os.environ.get(ENV_VAR))


def apply_at_all_reduce(fault: Fault | None, rank: int, contribution: Any) -> None:
    """Misbehave as the float32 all-reduce starts, when `fault` targets this rank."""
    if fault is None or fault.rank != rank:
        return
    if fault.kind == "exit":
        os._exit(EXIT_CODE)
    if fault.kind == "hang":
        while True:
            time.sleep(3600)
    contribution[::CORRUPT_STRIDE] += 1


def corrupted_elements(count: int) -> int:
    """How many elements a `corrupt` fault changes in a buffer of `count` elements."""
    return len(range(0, count, CORRUPT_STRIDE))


RANK_HOOK = (
    f"{os.path.abspath(__file__)}:at_collective"  # the value of ENVCHECK_RANK_HOOK that loads this module
)


def at_collective(step: str, rank: int, contribution: Any) -> None:
    """The rank hook: misbehave as ENVCHECK_TEST_FAULT says when the float32 all-reduce starts."""
    if step == "all_reduce":
        apply_at_all_reduce(fault_from_env(), rank, contribution)
