"""`python -m envcheck` entry point."""

from __future__ import annotations

import sys

from envcheck.app.main import main

if __name__ == "__main__":
    sys.exit(main())
