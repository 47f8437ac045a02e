"""Every command's request (envcheck.app.requests): built in one place from the real parser, its fields exactly the
flags its parser declares (a misspelt or forgotten field fails here, not as a silent default at run time), frozen,
and the only thing below the parser that a command sees."""

from __future__ import annotations

import argparse
import dataclasses
import re
from collections.abc import Iterator

import pytest

from envcheck.app import main, multinode
from envcheck.app.requests import Handler
from envcheck.core.errors import UsageError
from tests.helpers import ROOT, request_of


def _commands(parser: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _commands(child, f"{path} {name}")


def _flags(parser: argparse.ArgumentParser) -> set[str]:
    skip = (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)
    return {a.dest for a in parser._actions if not isinstance(a, skip)}


COMMANDS = [
    *_commands(main.build_parser(), "envcheck"),
    ("python -m envcheck.distributed", multinode.build_parser()),
]


@pytest.mark.parametrize("path, parser", COMMANDS, ids=[path for path, _ in COMMANDS])
def test_every_command_has_a_request_whose_fields_are_its_flags(
    path: str, parser: argparse.ArgumentParser
) -> None:
    handler = parser._defaults.get("handler")
    if path == "envcheck":  # no subcommand given: main says which there are
        assert handler is None
        return
    assert isinstance(handler, Handler), path
    assert {f.name for f in dataclasses.fields(handler.request)} == _flags(parser), path
    assert handler.request.__dataclass_params__.frozen, path  # type: ignore[attr-defined]


def test_a_request_cannot_be_changed_and_keeps_its_lists_as_tuples() -> None:
    run = request_of("run", "--timeout", "30")
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.timeout = 5  # what context_from_args once did to args.expect_gpus
    assert request_of("fleet", "a.json", "b.json").reports == ("a.json", "b.json")


@pytest.mark.parametrize(
    "argv, words",
    [
        (["run", "--json", "-", "--junit", "-"], "--json and --junit both write to stdout"),
        (["facts", "--json", "-", "--bundle", "-"], "--json and --bundle both write to stdout"),
        (["explain", "b.json", "--json", "b.json"], "--json and BUNDLE both name b.json"),  # the input stays
        (["bench", "--json", "-"], None),
        (["explain", "b.json", "--json", "-"], None),
    ],
)
def test_the_files_a_request_names_are_checked_where_it_is_built(argv: list[str], words: str | None) -> None:
    if words is None:
        request_of(*argv)  # the healthy twin: one report on stdout, the input left alone
        return
    with pytest.raises(UsageError, match=re.escape(words)):
        request_of(*argv)


NAMESPACE = re.compile(r"\bargparse\.Namespace\b|from argparse import[^\n]*\bNamespace\b|getattr\(args\b")


def test_nothing_below_the_parser_sees_a_namespace_or_reads_an_argument_by_a_computed_name() -> None:
    found = {
        str(p.relative_to(ROOT)): NAMESPACE.findall(p.read_text())
        for p in sorted((ROOT / "envcheck").rglob("*.py"))
        if p != ROOT / "envcheck" / "app" / "requests.py"
    }
    assert {p: names for p, names in found.items() if names} == {}
    assert NAMESPACE.search((ROOT / "envcheck" / "app" / "requests.py").read_text())  # the one place
