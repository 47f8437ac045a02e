"""The `envcheck` command: its parser (each command module registers its own subcommands, each with its handler and
the request it takes: envcheck.app.requests) and `main(argv) -> int`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Protocol

from envcheck import __version__
from envcheck.app import bench, burn, commands, explain, fleet, host, images
from envcheck.app.args import Parser
from envcheck.app.guard import guard
from envcheck.core.errors import UsageError


class CommandPlugin(Protocol):
    """A module that adds its own subcommands, each with its handler (`set_defaults(handler=Handler(Request, fn))`)."""

    def register(self, sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None: ...


# The modules that add subcommands, in the order `envcheck --help` lists them, reached by reference (mypy checks
# each against the Protocol).
PLUGINS: tuple[CommandPlugin, ...] = (commands, bench, burn, images, host, explain, fleet)


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, plugins included."""
    parser = Parser(prog="envcheck", description="Prove that this PyTorch + CUDA environment works.")
    parser.add_argument("--version", action="version", version=f"envcheck {__version__}")
    sub: argparse._SubParsersAction[argparse.ArgumentParser] = parser.add_subparsers(
        dest="command", parser_class=Parser
    )
    for plugin in PLUGINS:
        plugin.register(sub)
    # no subcommand: no handler, and the message lists what is there
    parser.set_defaults(handler=None, subcommands=tuple(sub.choices))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: returns the exit code (0 ok, 1 check failed, 2 bad input, 3 a report could not be written,
    130 Ctrl-C, 143 SIGTERM)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if not args_list or (args_list[0].startswith("-") and args_list[0] not in ("-h", "--help", "--version")):
        args_list.insert(0, "run")

    def call() -> int:
        try:
            parsed = build_parser().parse_args(args_list)
            if parsed.handler is None:
                raise UsageError(f"no command given; choose one of {', '.join(parsed.subcommands)}")
            return int(
                parsed.handler(parsed)
            )  # the handler types the request (envcheck.app.requests), then runs
        except (
            UsageError
        ) as exc:  # in a node mode, a mistyped flag must neither drain the node nor pass unseen
            from envcheck.app.usage import node_usage_error

            return node_usage_error(args_list, exc)

    return guard(call)
