"""`python -m envcheck` and the `envcheck` command: the fork server first, then the front door.

A run of the torch checks spends most of its time in the fork server's `import torch`; starting that server before
the front door and the check registry are imported (about 0.4 s) overlaps the two (envcheck.core.isolation.early).
"""

from __future__ import annotations

import sys


def main() -> int:
    """Start the fork server early when the words ask for a torch run, then hand over to envcheck.app.main."""
    from envcheck.core.isolation.early import start_early

    start_early(sys.argv[1:])
    from envcheck.app.main import main as app_main

    return app_main()


if __name__ == "__main__":
    sys.exit(main())
