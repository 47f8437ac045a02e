"""The `envcheck` command: its parser (plugins register their own subcommands) and `main(argv) -> int`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Protocol

from envcheck import __version__
from envcheck.app import bench, commands, explain, fleet, host, images
from envcheck.app.args import Parser, add_run_arguments, check_stdout, output_path, positive_float
from envcheck.app.cluster_mode import add_arguments as add_cluster_arguments
from envcheck.app.guard import guard
from envcheck.core.errors import UsageError


class CommandPlugin(Protocol):
    """A module that adds its own subcommands, each with its handler function (`set_defaults(handler=fn)`)."""

    def register(self, sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None: ...


# Subcommands that live in their own modules, reached by reference (mypy checks each against the Protocol).
PLUGINS: tuple[CommandPlugin, ...] = (bench, images, host, explain, fleet)


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, plugins included."""
    parser = Parser(prog="envcheck", description="Prove that this PyTorch + CUDA environment works.")
    parser.add_argument("--version", action="version", version=f"envcheck {__version__}")
    sub: argparse._SubParsersAction[argparse.ArgumentParser] = parser.add_subparsers(
        dest="command", parser_class=Parser
    )
    run = sub.add_parser("run", help="run the checks (the default)")
    add_run_arguments(run)
    add_cluster_arguments(run)
    run.set_defaults(handler=commands.cmd_run)
    listing = sub.add_parser("list", help="list every check with its level and needs")
    listing.set_defaults(handler=commands.cmd_list)
    facts = sub.add_parser("facts", help="print the environment facts")
    facts.add_argument("--json", type=output_path, metavar="PATH", help="write JSON ('-' = stdout only)")
    facts.add_argument("--timeout", type=positive_float, default=60.0, metavar="SECONDS")
    facts.add_argument(
        "--bundle", type=output_path, metavar="FILE", help="write a bundle for `envcheck explain`"
    )
    facts.set_defaults(handler=commands.cmd_facts)
    for plugin in PLUGINS:
        plugin.register(sub)
    parser.set_defaults(subcommands=tuple(sub.choices))  # the "no command given" message lists what is there
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: returns the exit code (0 ok, 1 check failed, 2 bad input, 3 a report could not be written,
    130 Ctrl-C, 143 SIGTERM)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if not args_list or (args_list[0].startswith("-") and args_list[0] not in ("-h", "--help", "--version")):
        args_list.insert(0, "run")

    def call() -> int:
        try:
            args = build_parser().parse_args(args_list)
            check_stdout(args)
            handler = getattr(args, "handler", None)
            if handler is None:
                raise UsageError(f"no command given; choose one of {', '.join(args.subcommands)}")
            return int(handler(args))
        except (
            UsageError
        ) as exc:  # in a node mode, a mistyped flag must neither drain the node nor pass unseen
            from envcheck.app.usage import node_usage_error

            return node_usage_error(args_list, exc)

    return guard(call)
