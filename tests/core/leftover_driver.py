"""A stand-in for `envcheck run --level full` with the checks that fill the temp dir, behind the CLI's one error handler.

Usage: python -m tests.core.leftover_driver [--hang-only]. The real Runner runs the real container.limits (a
2-worker DataLoader), train.resume (a TemporaryDirectory for its checkpoint) and compile.inductor (Inductor's
cache), plus a check that holds a real DataLoader's `pymp-*` dir until it is killed; the test signals it at chosen
moments. With --hang-only it runs that check alone: a live run that stays (tests/core/test_stale_rundirs.py).
"""

from __future__ import annotations

import sys

from envcheck.app.guard import guard
from envcheck.checks.check_registry import registry
from envcheck.checks.hooks import HOOKS
from envcheck.core.check import CheckSpec, Context, Level
from envcheck.core.runner import Runner
from tests.core import fault_checks

REAL = ("container.limits", "train.resume", "compile.inductor")


def main() -> int:
    checks = registry()
    specs = [] if "--hang-only" in sys.argv[1:] else [checks[name] for name in REAL]
    specs.append(
        CheckSpec(
            "test.holds_a_dataloader", fault_checks.holds_a_dataloader, "hangs", group="pymp", timeout_s=600
        )
    )
    with Runner(Context(level=Level.FULL, allow_cpu=True), share_gpu=True, hooks=HOOKS) as runner:
        runner.run(specs)
    return 0


if __name__ == "__main__":
    sys.exit(guard(main))
