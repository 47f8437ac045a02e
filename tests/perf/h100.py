"""Real figures from one `envcheck bench --quick` on an H100 (data/h100_bench_quick.json), as test fixtures."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

_DATA = Path(__file__).with_name("data") / "h100_bench_quick.json"


def h100_run() -> dict[str, Any]:
    """The recorded run: `device`, `units` (name, status, summary, gpu_state) and `figures`."""
    loaded: dict[str, Any] = json.loads(_DATA.read_text())
    return copy.deepcopy(loaded)


def h100_figure(key: str) -> dict[str, Any]:
    """One recorded figure by key."""
    return next(f for f in h100_run()["figures"] if f["key"] == key)
