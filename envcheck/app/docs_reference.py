"""The reference pages of the documentation site, generated from the code: checks (the registry), the CLI (the
parser), the image matrix (docker/matrix.toml) and finding codes. `python -m envcheck.app.docs_reference [DIR]`
(`make docs-reference`) rewrites docs/reference/; tests/app/test_docs_reference.py fails when a committed page and
the code differ."""

from __future__ import annotations

import argparse
import html
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from envcheck.app.docs_codes import codes_page
from envcheck.app.docs_evidence import evidence_page
from envcheck.app.docs_markdown import HEADER, _anchor, _table, _text

ROOT = Path(__file__).resolve().parents[2]
__all__ = ["PAGES", "codes_page", "main"]


def checks_page() -> str:
    """Every check of the registry, in report order."""
    from envcheck.checks.check_registry import registry

    rows = [
        (
            f"{_anchor(s.name)}`{s.name}`",
            s.level.value,
            s.needs.describe(),
            f"{s.timeout_s:g} s",
            s.description,
            f"`{s.func.__module__.removeprefix('envcheck.')}`",
        )
        for s in registry().values()
    ]
    # one table and no headings: the page takes the table of contents' width too (Material's front matter)
    return (
        "---\nhide:\n  - toc\n---\n"
        + HEADER
        + "# Checks\n\nEvery check `envcheck run` knows, in report order (`envcheck list` prints the same); "
        "each has its own anchor (`checks.md#cuda.available`). "
        "`quick` runs by default, `--level full` adds the rest; a check whose needs are unmet is a `skip` with "
        "the reason.\n\n"
        + _table(
            ("check", "level", "needs", "timeout", "what it proves", "module (envcheck.)"),
            rows,
            raw_first=True,
        )
    )


def _flags(parser: argparse.ArgumentParser, path: str = "envcheck") -> list[tuple[object, ...]]:
    """One row per flag: its anchor (`<command words>-<flag>`, e.g. `run--allow-cpu`) and code, choices, default,
    meaning."""
    rows: list[tuple[object, ...]] = []
    prefix = "-".join(path.split()[1:])
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        if action.option_strings:
            name = ", ".join(action.option_strings)
            if action.nargs != 0:
                name += f" {action.metavar or action.dest.upper()}"
        else:
            name = str(action.metavar or action.dest).upper()
        choices = ", ".join(str(c) for c in action.choices) if action.choices else ""
        default = (
            action.default
            if action.default not in (None, False, argparse.SUPPRESS) and action.nargs != 0
            else ""
        )
        key = (action.option_strings[-1] if action.option_strings else str(action.dest)).lstrip("-")
        anchor = f"{prefix}--{key}" if prefix else f"--{key}"
        code = html.escape(name, quote=False).replace("|", "&#124;")
        rows.append(
            (
                f"{_anchor(anchor)}<code>{code}</code>",
                choices,
                default,
                parser._get_formatter()._expand_help(action) if action.help else "",
            )
        )
    return rows


def _commands(
    parser: argparse.ArgumentParser, path: str
) -> Iterator[tuple[str, argparse.ArgumentParser, str]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, child in action.choices.items():
                yield f"{path} {name}", child, helps.get(name, "")
                yield from _commands(child, f"{path} {name}")


def cli_page() -> str:
    """Every command and flag, walked from the parser `envcheck` itself uses."""
    from envcheck.app.main import build_parser

    parser = build_parser()
    out = [
        HEADER,
        "# Command line\n\nEvery command and flag, read from envcheck's own parser; each flag has its own anchor "
        "(`cli.md#run--allow-cpu` for `envcheck run --allow-cpu`). `envcheck` alone means `envcheck run`. Exit codes: [Results](../index.md#exit-codes) and "
        "[Clusters](../cluster.md).\n",
    ]
    for path, child, help_text in [
        ("envcheck", parser, parser.description or ""),
        *_commands(parser, "envcheck"),
    ]:
        out.append(f"\n## `{path}`\n\n{_text(help_text)}\n\n")
        flags = _flags(child, path)
        table = _table(("flag", "choices", "default", "meaning"), flags, raw_first=True)
        out.append(table if flags else "No flags.\n")
    return "".join(out)


def matrix_page() -> str:
    """The image matrix's rows and every tag each row gets, per target."""
    from envcheck.images.matrix import default_matrix_path, load_matrix

    rows = load_matrix(default_matrix_path()).rows
    out = [
        HEADER,
        "# Image matrix and tags\n\nFrom `docker/matrix.toml` ([format](../matrix.md)), as "
        "`envcheck matrix list` reads it. Published as `ghcr.io/<owner>/envcheck:<tag>` "
        "([publishing](../publishing.md)).\n\n",
        _table(
            ("row", "torch", "torchvision", "torchaudio", "CUDA", "python", "index"),
            [
                (
                    f"`{r.id}`" + (" (latest)" if r.latest else ""),
                    r.torch,
                    r.torchvision,
                    r.torchaudio or "-",
                    r.cuda,
                    r.python,
                    r.index_url,
                )
                for r in rows
            ],
        ),
        "\n## Tags\n\nThe first tag of each row and target is its full tag; the others are aliases that move "
        "to the newest build. A dated `<full tag>-YYYYMMDD` is added at each publish and never moves.\n\n",
    ]
    targets = sorted({t for r in rows for t in r.targets}, key=["runtime", "devel", "jupyter", "ssh"].index)
    out.append(
        _table(
            ("row", *targets),
            [
                (
                    f"`{r.id}`",
                    *(
                        ", ".join(f"`{t}`" for t in r.tags(target)) if target in r.targets else "-"
                        for target in targets
                    ),
                )
                for r in rows
            ],
        )
    )
    return "".join(out)


CONTENTS_RECORDS = ROOT / "docs" / "reference" / "contents.json"


def contents_page() -> str:
    """What each image holds: the matrix's rows and platforms, and each built image's SBOM figures and sizes."""
    from envcheck.images.contents import load_records, render
    from envcheck.images.matrix import default_matrix_path, load_matrix

    rows = load_matrix(default_matrix_path()).rows
    return (
        HEADER
        + "# What each image holds\n\nEvery row of the matrix ([format](../matrix.md), [tags](matrix.md)) with "
        "its platforms and targets: `runtime` to run, `devel` to build CUDA extensions (nvcc pinned to torch's "
        "CUDA), `jupyter` and `ssh` for [dev containers](../dev-containers.md). Each image also carries its SBOM "
        "(SPDX 2.3, made by syft from the image's own dpkg and Python package metadata), attested and signed "
        "beside the GPU report when it is published ([publishing](../publishing.md#what-each-image-is-made-of)).\n\n"
        + render(rows, load_records(CONTENTS_RECORDS))
    )


PAGES: dict[str, Callable[[], str]] = {
    "checks.md": checks_page,
    "cli.md": cli_page,
    "matrix.md": matrix_page,
    "codes.md": codes_page,
    "contents.md": contents_page,
    "evidence.md": evidence_page,
}


def main(argv: list[str] | None = None) -> int:
    """Write every reference page into DIR (default docs/reference)."""
    args = sys.argv[1:] if argv is None else argv
    folder = Path(args[0]) if args else ROOT / "docs" / "reference"
    folder.mkdir(parents=True, exist_ok=True)
    for name, page in PAGES.items():
        (folder / name).write_text(page())
        print(f"wrote {folder / name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
