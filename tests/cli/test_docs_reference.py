"""The reference pages under docs/reference/ are what envcheck/app/docs_reference.py makes from the code today: a
check, flag, matrix row or finding code added without `make docs-reference` fails here. The generators read the
real registry, parser, matrix and code tables (nothing staged)."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest

from envcheck.app import docs_reference
from envcheck.app.docs_reference import PAGES, checks_page, cli_page, codes_page, matrix_page
from envcheck.app.main import build_parser
from envcheck.checks.check_registry import registry
from envcheck.checks.cuda.codes import CUDA_CODES
from envcheck.checks.gpu_health.xid_catalog import CATALOG
from envcheck.cluster.severity import SEVERITY
from envcheck.images.matrix import default_matrix_path, load_matrix
from tests.helpers import ROOT

REFERENCE = ROOT / "docs" / "reference"


@pytest.mark.parametrize("name", sorted(PAGES))
def test_the_committed_page_is_what_the_code_generates(name: str) -> None:
    committed = (REFERENCE / name).read_text()
    assert committed == PAGES[name](), (
        f"docs/reference/{name} is stale: run `make docs-reference` and commit it"
    )


def test_the_checks_page_names_every_check_with_its_level_needs_timeout_and_module() -> None:
    page = checks_page()
    for spec in registry().values():
        row = next(
            line
            for line in page.splitlines()
            if line.startswith(f'| <a id="{spec.name}"></a>`{spec.name}` |')
        )
        assert f"| {spec.level.value} | {spec.needs.describe()} | {spec.timeout_s:g} s |" in row
        assert f"`{spec.func.__module__.removeprefix('envcheck.')}`" in row


def _walk(parser: argparse.ArgumentParser, path: str) -> list[tuple[str, argparse.ArgumentParser]]:
    found = [(path, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found += _walk(child, f"{path} {name}")
    return found


def test_the_cli_page_has_every_command_and_every_flag() -> None:
    page = cli_page()
    commands = _walk(build_parser(), "envcheck")
    assert len(commands) > 15
    for path, parser in commands:
        section = page.split(f"## `{path}`\n", 1)[1].split("\n## ", 1)[0]
        for action in parser._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert f"<code>{flag}" in section or f", {flag}" in section, (path, flag)


def test_the_matrix_page_has_every_row_and_tag() -> None:
    page = matrix_page()
    for row in load_matrix(default_matrix_path()).rows:
        for target in row.targets:
            for tag in row.tags(target):
                assert f"`{tag}`" in page, tag


def test_the_codes_page_has_a_section_per_code_with_its_class_drain_and_fix() -> None:
    """Each code is its own heading with the code as its anchor (a search hit or a link lands on it, and its snippet
    is its own text), listed in the index at the top."""
    page = codes_page()
    for code in SEVERITY:
        if not code.endswith(".*"):
            assert f"### `{code}` {{#{code}}}" in page and f"(#{code})" in page, code
    for number in CUDA_CODES:
        assert f"### `cuda.error.{number}` {{#cuda.error.{number}}}" in page
    for xid in CATALOG:
        assert f"### `xid.{xid}` {{#xid.{xid}}}" in page
    assert "### `shm.small` {#shm.small}\n\n**config**, drains: -: " in page
    assert "### `gpu.lost` {#gpu.lost}\n\n**node**, drains: hard: " in page
    assert "### `perf.matmul_slow` {#perf.matmul_slow}\n\n**node**, drains: soft: " in page
    assert "### `<check>.<status>` {#check.status}" in page


def test_no_pipe_shows_a_backslash_and_no_placeholder_vanishes_as_html() -> None:
    """`--profile FILE|NAME` rendered as `FILE\\|NAME` inside a code span; `<the version torch pins>` in a fix is text,
    not a tag the browser drops."""
    from envcheck.app.docs_markdown import _cell, _text

    assert "--profile FILE&#124;NAME</code>" in cli_page() and "FILE\\|NAME" not in cli_page()
    assert _cell("`a|b` c|d") == "<code>a&#124;b</code> c&#124;d" and _cell("`x`") == "`x`"
    assert (
        _text("pip install triton==<the version torch pins>")
        == "pip install triton==&lt;the version torch pins&gt;"
    )
    assert _text("keep `<i>` as code") == "keep `<i>` as code"


def test_a_check_added_to_the_registry_changes_the_page(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison can fail: a new check is a new row."""
    spec = next(iter(registry().values()))
    added = {**registry(), "test.added": dataclasses.replace(spec, name="test.added")}
    monkeypatch.setattr("envcheck.checks.check_registry.registry", lambda: added)
    assert '<a id="test.added"></a>`test.added` |' in checks_page()
    assert checks_page() != (REFERENCE / "checks.md").read_text()


def test_main_writes_every_page(tmp_path: Path) -> None:
    assert docs_reference.main([str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(PAGES)
    assert (tmp_path / "codes.md").read_text() == (REFERENCE / "codes.md").read_text()
