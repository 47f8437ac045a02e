"""The operations of the engine's two process protocols, typed: the worker's (run a check, collect the facts,
answer a ping) and the fork server's (fork a worker, preload modules, report its state). Messages are JSON
objects whose `op` is one of these values."""

from __future__ import annotations

import enum


class Op(str, enum.Enum):
    """One request a worker or the fork server understands."""

    CHECK = "check"  # worker: run the named check with the given context
    FACTS = "facts"  # worker: call the facts hook
    PING = "ping"  # worker: answer, to prove it is alive
    FORK = "fork"  # fork server: fork a worker on the passed fds
    PRELOAD = "preload"  # fork server: import heavy modules once, before forking
    STATE = "state"  # fork server: what is imported; whether CUDA was initialised (it must never be)
