"""Run the full level's isolated checks in one worker, in a given order, and print each verdict as JSON.

    python -m tests.checks.order_driver registry|reversed|seed:N

Every isolated check of `--level full` is put in one isolation group (one worker process, one after another), so
whatever one check leaves in the process is what the next one meets (tests/checks/test_order_independence.py).
Prints {name: [status, code]} on the last line. No GPU is used: CUDA_VISIBLE_DEVICES is emptied by the caller.
"""

from __future__ import annotations

import dataclasses
import json
import random
import sys

from envcheck.checks.check_registry import registry
from envcheck.checks.hooks import HOOKS
from envcheck.core.check import CheckSpec, Context, Level
from envcheck.core.runner import Runner
from envcheck.core.selection import select

ONE = "one"  # the single isolation group


def ordered(order: str) -> list[CheckSpec]:
    """The full level's isolated checks in one group, in `order`."""
    specs = [dataclasses.replace(s, group=ONE) for s in select(registry(), Level.FULL) if s.isolated]
    if order == "reversed":
        return specs[::-1]
    if order.startswith("seed:"):
        random.Random(int(order.partition(":")[2])).shuffle(specs)
    return specs


def verdicts(order: str) -> dict[str, list[str | None]]:
    """Each check's (status, code) when the checks run in `order` in one worker."""
    with Runner(Context(level=Level.FULL, allow_cpu=True), share_gpu=True, hooks=HOOKS) as runner:
        results = runner.run(ordered(order))
    return {r.name: [r.status.value, r.code] for r in results}


if __name__ == "__main__":
    print(json.dumps(verdicts(sys.argv[1] if len(sys.argv) > 1 else "registry")))
