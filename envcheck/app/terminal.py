"""The terminal envcheck's tables are printed on: rich's Console, whose failures go where every output failure goes
(envcheck.app.output). A module of its own so that a command that prints no table never imports rich."""

from __future__ import annotations

import sys

from rich.console import Console

from envcheck.app.output import lost, stdout_gone


class Terminal(Console):
    """rich's Console for envcheck's tables: a broken pipe or full stdout is recorded (TERMINAL_LOST), not an
    exit (rich's own on_broken_pipe raises SystemExit(1) before any report is written) and not a traceback."""

    def on_broken_pipe(self) -> None:
        """The reader of the table exited: send the rest to /dev/null and remember it."""
        stdout_gone()
        lost("the table could not be shown: its reader exited (broken pipe)")

    def print(self, *objects: object, **kwargs: object) -> None:
        """Print as rich does; an OSError of the terminal (ENOSPC, EIO) is recorded, not raised."""
        try:
            super().print(*objects, **kwargs)  # type: ignore[arg-type]
        except BrokenPipeError:
            self.on_broken_pipe()
        except OSError as exc:
            if (
                self.file is sys.stdout
            ):  # a full stderr (--for prints the table there) must not silence stdout
                stdout_gone()
            lost(f"the table could not be shown: {exc.strerror or exc}")
