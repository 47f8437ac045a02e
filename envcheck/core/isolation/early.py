"""The fork server started before the command line is read, so its `import torch` overlaps envcheck's own start.

`python -m envcheck run ...` spends about 0.4 s importing the front door and the check registry before the Runner
exists (the quick level's whole budget beyond a bare `import torch` is about 0.7 s on 2 cores). The entry
point (`envcheck.__main__.main`) calls `start_early(argv)` first: when the words ask for a run of the torch checks it
spawns the fork server there and then, with the process's environment, exactly as the Runner would; the Runner of
that run adopts it (`adopt`). Any other command, or a run the Runner will not make with these defaults (a node mode:
`--for`), starts nothing. A server nobody adopts (a usage error ends the process first) dies with it: its lifeline
closes, and it removes its run dir at EOF.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the server's machinery is imported only when a server starts: not for another command
    from envcheck.core.isolation.server_handle import ServerHandle

_early: list[ServerHandle] = []  # at most one, until a Runner adopts it
RUN = "run"
NODE = "node."  # the torch-free node checks' domain (their spec group "node": run inline, no fork server)
NOT_A_TORCH_RUN = ("-h", "--help", "--version", "--for", "--list")


def wants_torch_run(argv: Sequence[str]) -> bool:
    """Whether these command-line words make `envcheck run` run the torch checks (a bare command means `run`): not
    another command, not a node mode (`--for`), not `--only` naming the torch-free node checks alone."""
    words = list(argv)
    if words and not words[0].startswith("-") and words[0] != RUN:
        return False  # another command (list, facts, bench, image, ...)
    if any(w.split("=", 1)[0] in NOT_A_TORCH_RUN for w in words):
        return False
    for i, word in enumerate(words):
        only = word.split("=", 1)[1] if word.startswith("--only=") else None
        if word == "--only" and i + 1 < len(words):
            only = words[i + 1]
        if only is not None and all(n.strip().startswith(NODE) for n in only.split(",") if n.strip()):
            return False
    return True


def start_early(argv: Sequence[str]) -> None:
    """Spawn the fork server now when `argv` asks for a torch run; never raises (the Runner starts one later)."""
    if _early or not wants_torch_run(argv):
        return
    try:
        from envcheck.core.isolation.server_handle import ServerHandle

        handle = ServerHandle()
        handle.start()
    except Exception:  # anything here is the Runner's to meet and name, later, on its own path
        return
    _early.append(handle)


def adopt() -> ServerHandle | None:
    """The server started early, for the Runner that makes this run (once), or None."""
    return _early.pop() if _early else None
