"""`envcheck run` (the real CLI, cmd_run included) over a registry of one healthy and one hung check.

Usage: python -m tests.core.cli_driver MARKER [envcheck run arguments...]
"""

from __future__ import annotations

import sys

import envcheck.checks.check_registry
from envcheck.app.main import main
from envcheck.core.check import CheckSpec
from tests.core import fault_checks

SPECS = [
    CheckSpec("test.healthy", fault_checks.healthy, "passes", isolated=False),
    CheckSpec("test.hangs", fault_checks.sleeps_forever, "hangs", group="hung", timeout_s=600),
]

if __name__ == "__main__":
    envcheck.checks.check_registry.registry = lambda: {s.name: s for s in SPECS}  # type: ignore[assignment]
    sys.exit(main(["run", "--allow-cpu", *sys.argv[2:]]))
