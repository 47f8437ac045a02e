"""The bench's worker: the engine's worker protocol, answering from the bench-private registry.

Spawned as `python -m envcheck.bench.worker` by `BenchWorker` (engine.py); each request is run
by the engine's own `execute`, so needs, crash handling and the result model are the engine's.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, TextIO

from envcheck.core.check import Context
from envcheck.core.execute import execute, jsonable


def handle(request: dict[str, Any]) -> dict[str, Any]:
    """Answer one request (`check` by bench unit name, or `ping`)."""
    op = request.get("op")
    if op == "check":
        from envcheck.bench.units import bench_registry

        spec = bench_registry()[request["name"]]
        return {"result": jsonable(execute(spec, Context.from_dict(request["context"])).to_dict())}
    if op == "ping":
        return {"pong": os.getpid()}
    raise ValueError(f"unknown op {op!r}")


def serve(requests: TextIO, replies: TextIO) -> None:
    """Answer requests until stdin closes."""
    for line in requests:
        if line.strip():
            replies.write(json.dumps(handle(json.loads(line))) + "\n")
            replies.flush()


def main() -> None:
    """Only protocol lines reach the parent; everything else the units print goes to stderr."""
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    serve(sys.stdin, replies)


if __name__ == "__main__":
    main()
