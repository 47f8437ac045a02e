"""The one error type the CLI turns into a one-line message and an exit code."""

from __future__ import annotations


class FatalError(Exception):
    """A problem the user must fix; printed as one line, never as a traceback."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


class UsageError(FatalError):
    """Bad usage or bad input (exit code 2)."""
