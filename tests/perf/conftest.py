"""One helper to run `envcheck bench` the way the CLI does (argparse + handler), in this process.

The units still run in spawned bench workers. `tests.helpers.run_cli("bench", ...)` drives the same handler
through `python -m envcheck` (envcheck.app.main registers the subcommand).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from envcheck.app.bench import register

FAST_UNITS = "bench.cpu_matmul,bench.cpu_memory"


def bench(*argv: str) -> int:
    """Parse `envcheck bench ARGV` and run its handler; return the exit code."""
    from envcheck.app.args import Parser
    from envcheck.app.guard import guard

    def call() -> int:  # as the CLI parses: the shared Parser and error handler (a bad value is exit 2)
        parser = Parser(prog="envcheck")
        register(parser.add_subparsers(parser_class=Parser))
        args = parser.parse_args(["bench", *argv])
        code: int = args.handler(args)
        return code

    return guard(call, signals=False)


@contextlib.contextmanager
def gpus_hidden() -> Iterator[None]:
    """The CPU path on any host: the spawned bench workers inherit CUDA_VISIBLE_DEVICES='' (a real no-GPU)."""
    before = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    try:
        yield
    finally:
        if before is None:
            del os.environ["CUDA_VISIBLE_DEVICES"]
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = before


@pytest.fixture
def no_gpu() -> Iterator[None]:
    """Hide every GPU from the bench workers for one test."""
    with gpus_hidden():
        yield


@pytest.fixture(scope="session")
def cpu_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A real quick CPU bench of the fast units, with its JSON and plots on disk."""
    out = tmp_path_factory.mktemp("bench")
    with gpus_hidden():
        code = bench(
            "--quick",
            "--allow-cpu",
            "--only",
            FAST_UNITS,
            "--cpu-threads",
            "1",
            "--json",
            str(out / "bench.json"),
            "--plots",
            str(out / "plots"),
        )
    doc: dict[str, Any] = json.loads((out / "bench.json").read_text())
    return {"code": code, "doc": doc, "dir": out}


@pytest.fixture
def run_bench() -> Callable[..., int]:
    """The `bench` helper as a fixture."""
    return bench


@pytest.fixture
def write_json(tmp_path: Path) -> Callable[[dict[str, Any]], str]:
    """Write a document to a temp file and return its path."""

    def _write(doc: dict[str, Any]) -> str:
        path = tmp_path / "doc.json"
        path.write_text(json.dumps(doc))
        return str(path)

    return _write
