"""A stand-in for `envcheck run` with hung checks: the real Runner behind the CLI's one error handler.

Usage: python -m tests.core.lifetime_driver MARKER. Prints `hung` once both hung checks started a grandchild.
"""

from __future__ import annotations

import os
import sys

from envcheck.app.guard import guard
from envcheck.core.check import CheckSpec, Context
from envcheck.core.runner import Runner
from tests.core import fault_checks


def main() -> int:
    marker = sys.argv[1]
    specs = [
        CheckSpec(f"test.hang_{g}", fault_checks.sleeps_forever, "hangs", group=g, timeout_s=600)
        for g in ("a", "b")
    ]
    env = {**os.environ, "ENVCHECK_TEST_MARKER": marker}
    with Runner(Context(), env=env, share_gpu=True) as runner:
        runner.run(specs)
    return 0


if __name__ == "__main__":
    sys.exit(guard(main))
