"""A run's environment facts, collected in a worker of their own beside the checks.

The facts read device properties, NVML and the toolchain, and never create a CUDA context (envcheck.probe.facts), so
their worker may overlap any GPU group (off the GPU lane). `prefetch` starts them early; `result` waits for them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from envcheck.core.check import reference
from envcheck.core.isolation.failure import FailureKind, WorkerFailure
from envcheck.core.isolation.protocol import Op
from envcheck.core.isolation.worker_handle import WorkerHandle

FACTS_TIMEOUT_S = 30.0
FACTS_GROUP = "facts"


class FactsCollector:
    """The facts hook run once in the FACTS_GROUP worker, in a thread of its own or when asked."""

    def __init__(
        self,
        hook: Callable[[], Callable[[], dict[str, Any]] | None],
        worker: Callable[[str], WorkerHandle],
        release: Callable[[str], None],
        left: Callable[[], float | None],
    ) -> None:
        """`hook`: the run's facts hook as it is when collecting starts (the Runner's hooks may be set after it is made);
        `worker`, `release`: the Runner's group workers; `left`: seconds to the run's deadline."""
        self._hook, self._worker, self._release, self._left = hook, worker, release, left
        self._facts: dict[str, Any] | None = None
        self._thread: threading.Thread | None = None

    def prefetch(self) -> None:
        """Start collecting now, beside the checks."""
        if self._hook() is None or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._collect, daemon=True)
        self._thread.start()

    def result(self) -> dict[str, Any]:
        """The facts (collected now, or waited for), or why there are none."""
        if self._hook() is None:
            return {"error": {"absent": "facts were not asked for (no facts hook)"}}
        if self._thread is None:
            self._collect()
        else:
            while self._thread.is_alive():
                self._thread.join(0.2)  # short joins keep Ctrl-C and SIGTERM responsive
        return (
            self._facts
            if self._facts is not None
            else {"error": {"absent": "facts could not be collected: envcheck was interrupted"}}
        )

    def _collect(self) -> None:
        hook = self._hook()
        assert hook is not None  # both callers check it
        left = self._left()
        timeout = FACTS_TIMEOUT_S if left is None else max(1.0, min(FACTS_TIMEOUT_S, left))
        try:
            reply = self._worker(FACTS_GROUP).request({"op": Op.FACTS, "func": reference(hook)}, timeout)
        except Exception as exc:  # an abort closed the worker's pipes under this thread
            reply = WorkerFailure(FailureKind.EXIT, f"{type(exc).__name__}: {exc}")
        if isinstance(reply, WorkerFailure):
            self._facts = {"error": {"absent": f"facts could not be collected: {reply.reason}"}}
        else:
            self._facts = reply["facts"]
        self._release(FACTS_GROUP)
