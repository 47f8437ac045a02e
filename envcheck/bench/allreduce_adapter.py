"""The one seam between the bench and the distributed check's code (`envcheck.checks.distributed`).

The bench reuses that package's all-reduce sweep and its pure `busbw(algbw, world_size)`; nothing
here re-implements them. Until the package lands, `sweep_unavailable()` says so and the bench
unit reports SKIP with that reason.
"""

from __future__ import annotations

import importlib
from typing import Any

DISTRIBUTED_MODULE = "envcheck.checks.distributed"
# The names this adapter expects from the distributed package (the lead wires them on merge).
SWEEP_FUNCTION = "all_reduce_sweep"
BUSBW_FUNCTION = "busbw"


def _distributed() -> Any:
    return importlib.import_module(DISTRIBUTED_MODULE)


def sweep_unavailable() -> str | None:
    """Why the distributed sweep cannot be used, or None when it can."""
    try:
        module = _distributed()
    except ImportError as exc:
        return f"{DISTRIBUTED_MODULE} is not installed yet ({exc}); the all-reduce sweep lands with it"
    missing = [n for n in (SWEEP_FUNCTION, BUSBW_FUNCTION) if not callable(getattr(module, n, None))]
    if missing:
        return f"{DISTRIBUTED_MODULE} lacks {', '.join(missing)}; wire envcheck/bench/allreduce_adapter.py to it"
    return None


def busbw(algbw: float, world_size: int) -> float:
    """Bus bandwidth of an all-reduce (nccl-tests convention), from the distributed package."""
    return float(getattr(_distributed(), BUSBW_FUNCTION)(algbw, world_size))


def all_reduce_sweep(backend: str, world_size: int, sizes: list[int], timeout_s: float) -> list[dict[str, Any]]:
    """Run the distributed package's sweep; rows with bytes, time_s, algbw_gbps, busbw_gbps."""
    rows = getattr(_distributed(), SWEEP_FUNCTION)(
        backend=backend, world_size=world_size, sizes=sizes, timeout_s=timeout_s
    )
    return [dict(row) for row in rows]
