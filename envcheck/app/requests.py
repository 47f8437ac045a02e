"""The one place where a parsed command line becomes a typed request.

Each command declares a frozen dataclass beside its flags (`RunRequest` in run_args.py, `FleetRequest` in fleet.py,
...), whose fields are exactly its parser's destinations (tests/cli/test_requests.py holds every command to that), and
registers `Handler(ItsRequest, its_function)`. `Handler.typed` builds the request from argparse's values and checks the
files it names; nothing below it sees argparse's Namespace, reads an argument by a computed name, or writes into a
request.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from envcheck.core.errors import UsageError
from envcheck.core.text import one_line


@dataclass(frozen=True, kw_only=True)
class Request:
    """A command's arguments, as its parser checked them (a command without flags takes this one)."""

    def outputs(self) -> dict[str, str | None]:
        """The files the command names, by flag: its reports ('-': stdout), and an input that no report may replace
        (explain's BUNDLE). None: not asked for."""
        return {}

    @property
    def report_on_stdout(self) -> bool:
        """Whether a report goes to stdout (then the table goes to stderr)."""
        return "-" in self.outputs().values()


def check_outputs(outputs: Mapping[str, str | None]) -> None:
    """At most one report may go to stdout ('-'), so stdout stays one parseable document; and no two files may be
    the same (one would silently replace the other)."""
    dashes = [flag for flag, path in outputs.items() if path == "-"]
    if len(dashes) > 1:
        raise UsageError(f"{' and '.join(dashes)} both write to stdout; give all but one a file path")
    seen: dict[str, str] = {}
    for flag, path in outputs.items():
        if not path or path == "-":
            continue
        key = os.path.realpath(path)
        if key in seen:
            raise UsageError(
                f"{seen[key]} and {flag} both name {one_line(path)}; give each report its own file"
            )
        seen[key] = flag


R = TypeVar("R", bound=Request)


@dataclass(frozen=True)
class Handler(Generic[R]):
    """What a (sub)command does: the request its parser's values become, and the function that takes it. A parser
    stores it with `set_defaults(handler=Handler(...))`."""

    request: type[R]
    run: Callable[[R], int]

    def typed(self, parsed: argparse.Namespace) -> R:
        """The request of this command from argparse's values (its fields, each by name; a list of values becomes a
        tuple, so the request stays as parsed), its files checked."""
        values = {name: tuple(v) if isinstance(v, list) else v for name, v in vars(parsed).items()}
        request = self.request(
            **{field.name: values[field.name] for field in dataclasses.fields(self.request)}
        )
        check_outputs(request.outputs())
        return request

    def __call__(self, parsed: argparse.Namespace) -> int:
        """Run the command on its typed request."""
        return self.run(self.typed(parsed))
