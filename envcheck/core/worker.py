"""The child side of isolation: a spawned interpreter that runs checks on request.

Protocol: one JSON request per line on stdin, one JSON reply per line on the original stdout.
Everything checks print (Python or C level) goes to stderr, which the parent captures to a file.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from typing import Any, TextIO

from envcheck.core.check import CheckSpec, Context, Needs
from envcheck.core.execute import execute, jsonable


def resolve_spec(request: dict[str, Any]) -> CheckSpec:
    """The registered spec by name, or an ad-hoc one from a `module:function` reference."""
    from envcheck.checks import registry

    spec = registry().get(request["name"])
    if spec is not None:
        return spec
    module, _, attr = request["func"].partition(":")
    func = getattr(importlib.import_module(module), attr)
    return CheckSpec(request["name"], func, "ad hoc", needs=Needs(**request.get("needs", {})))


def _handle(request: dict[str, Any]) -> dict[str, Any]:
    op = request.get("op")
    if op == "check":
        spec = resolve_spec(request)
        result = execute(spec, Context.from_dict(request["context"]))
        # After a sticky CUDA error every later CUDA call here fails too: ask the runner for a fresh worker.
        from envcheck.checks.cuda_diagnosis import sticky_cuda_error

        recycle = sticky_cuda_error(f"{result.summary}\n{result.reason or ''}\n{result.details}")
        return {"result": jsonable(result.to_dict()), "recycle": recycle}
    if op == "facts":
        from envcheck.checks.facts import collect_facts

        return {"facts": jsonable(collect_facts())}
    if op == "ping":
        return {"pong": os.getpid()}
    raise ValueError(f"unknown op {op!r}")


def serve(requests: TextIO, replies: TextIO) -> None:
    """Answer requests until stdin closes."""
    for line in requests:
        if not line.strip():
            continue
        reply = _handle(json.loads(line))
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


def main() -> None:
    """Re-plumb stdout so that only protocol lines reach the parent, then serve."""
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    serve(sys.stdin, replies)


if __name__ == "__main__":
    main()
