"""Run fault checks (tests.core.fault_checks, by function name on argv) through the real engine in one isolation
group; print their results as one JSON list. Used staged (tests/hardened/staging.py) by test_poisoned_worker."""

from __future__ import annotations

import json
import sys

from envcheck.checks.hooks import HOOKS
from envcheck.core.check import CheckSpec, Context
from envcheck.core.runner import Runner
from tests.core import fault_checks


def main(names: list[str]) -> None:
    """Run the named checks in order, in one group; JSON to stdout."""
    specs = [
        CheckSpec(f"test.{name}", getattr(fault_checks, name), "staged", timeout_s=60, group="staged")
        for name in names
    ]
    with Runner(Context(), hooks=HOOKS) as runner:
        results = runner.run(specs)
    print(json.dumps([r.to_dict() for r in results]))


if __name__ == "__main__":
    main(sys.argv[1:])
