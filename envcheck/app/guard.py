"""The one error handler of every front door, as pre-commit's `error_handler`: a known failure is one line and
its exit code; anything else is envcheck's own bug, one line and exit 3, with the traceback saved to a log file."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable

from envcheck.app.output import reopen_closed_stdout, safe_streams, stdout_gone
from envcheck.core.errors import ExitCode, FatalError
from envcheck.core.signals import Interrupted, interruptible
from envcheck.core.text import one_line

LOG_NAME = "envcheck-crash.log"


def guard(call: Callable[[], int], prog: str = "envcheck", signals: bool = True) -> int:
    """Run a front door: a FatalError is one line and its exit code, Ctrl-C is 130, SIGTERM/SIGHUP are 128 + the
    signal (and kill every worker on the way out), any other exception is one line and exit 3 (envcheck's own
    failure, never the environment's) with the traceback in a log file; never a traceback on the terminal.
    `signals=False` leaves SIGTERM/SIGHUP as they are (a torchrun rank: torchrun's own teardown sends them)."""
    reopen_closed_stdout()
    safe_streams()
    try:
        with interruptible() if signals else contextlib.nullcontext():
            return int(call())
    except FatalError as exc:
        _say(f"{prog}: error: {one_line(exc.message)}")
        return exc.exit_code
    except BrokenPipeError:  # the reader of stdout exited while the table was printed (`envcheck | head`)
        stdout_gone()
        _say(f"{prog}: error: stdout was closed by its reader (broken pipe)")
        return ExitCode.INTERNAL
    except KeyboardInterrupt:
        _say(f"{prog}: interrupted")
        return ExitCode.INTERRUPTED
    except Interrupted as exc:
        _say(f"{prog}: stopped by {signal.Signals(exc.signum).name}")
        return exc.exit_code
    except Exception as exc:  # the last resort: envcheck's own bug
        where = save_traceback(prog)
        saved = f"traceback in {where}" if where else "the traceback could not be saved (no writable folder)"
        _say(
            f"{prog}: internal error (envcheck's own failure, not this environment's): "
            f"{type(exc).__name__}: {one_line(str(exc).splitlines()[0]) if str(exc) else ''}; {saved}"
        )
        return ExitCode.INTERNAL


def _say(line: str) -> None:
    """One line on stderr; a closed or full stderr is not a second failure."""
    with contextlib.suppress(OSError, ValueError):
        print(line, file=sys.stderr, flush=True)


def log_folders() -> list[str]:
    """Where a crash log may go, first choice first: ENVCHECK_LOG_DIR, XDG_CACHE_HOME/envcheck, the temp dir."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    candidates = [os.environ.get("ENVCHECK_LOG_DIR", ""), os.path.join(cache, "envcheck")]
    try:
        candidates.append(tempfile.gettempdir())
    except OSError:  # no writable temp dir at all (`docker run --read-only` without --tmpfs /tmp)
        pass
    return [c for c in candidates if c]


def save_traceback(prog: str) -> str | None:
    """Write the current exception's traceback to the first writable log folder; its path, or None."""
    text = f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {prog} {' '.join(sys.argv[1:])[:400]}\n{traceback.format_exc()}\n"
    for folder in log_folders():
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)
            path = os.path.join(folder, LOG_NAME)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "a", encoding="utf-8", errors="backslashreplace") as fh:
                fh.write(text)
            return path
        except (OSError, RuntimeError):  # RuntimeError: expanduser without HOME or a passwd entry
            continue
    return None
