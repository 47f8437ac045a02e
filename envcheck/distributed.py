"""`torchrun ... -m envcheck.distributed` (or `srun ... python -m envcheck.distributed`): the public module path of
the multi-node front door, which lives in `envcheck.app.multinode`."""

from __future__ import annotations

import sys

from envcheck.app.multinode import main, parse_args

__all__ = ["main", "parse_args"]

if __name__ == "__main__":
    sys.exit(main())
