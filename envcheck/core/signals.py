"""How signals stop a run: SIGTERM and SIGHUP become `Interrupted` in the main thread (like KeyboardInterrupt for
SIGINT), and clean-up that a second signal cannot cut short (SIGTERM, SIGHUP and SIGINT wait until it is done)."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

HELD = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


@contextlib.contextmanager
def deferred(redeliver: bool = True) -> Iterator[None]:
    """Hold SIGTERM/SIGHUP/SIGINT inside the block (main thread only: Python runs handlers there); the first
    that came is delivered again afterwards to the handler it would have reached, unless `redeliver` is False
    (the run is already stopping for a signal)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    came: list[int] = []

    def hold(signum: int, frame: object) -> None:
        came.append(signum)

    previous = {sig: signal.signal(sig, hold) for sig in HELD}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
    if came and redeliver:
        signal.raise_signal(came[0])


class Interrupted(BaseException):
    """SIGTERM or SIGHUP reached envcheck (raised in the main thread, like KeyboardInterrupt for SIGINT)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        """128 + the signal number, as a shell reports a process the signal ended."""
        return 128 + self.signum


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """Turn SIGTERM and SIGHUP into `Interrupted` in the main thread (so `with Runner` kills every worker)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_interrupted(signum: int, frame: object) -> None:
        raise Interrupted(signum)

    previous = {sig: signal.signal(sig, raise_interrupted) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
