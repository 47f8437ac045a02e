"""The documentation site builds with `mkdocs build --strict` (what `make docs` runs in CI): a broken link, a missing
anchor or a page left out of the nav fails. Real mkdocs and Material theme; the site goes to a temp dir."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT


def _build(site: Path, config: Path = ROOT / "mkdocs.yml") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(config),
            "--site-dir",
            str(site),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )


def test_the_site_builds_strictly_with_search_and_every_page(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="mkdocs is in the test extra: make test-venv")
    pytest.importorskip("material", reason="mkdocs-material is in the test extra: make test-venv")
    site = tmp_path / "site"
    done = _build(site)
    assert done.returncode == 0, done.stderr
    assert (site / "search" / "search_index.json").is_file()
    pages = {p.relative_to(ROOT / "docs").with_suffix("") for p in (ROOT / "docs").rglob("*.md")}
    for page in pages:
        built = site / page / "index.html" if page.name != "index" else site / page.parent / "index.html"
        if page.name == "README":
            built = site / page.parent / "index.html"
        assert built.is_file(), page
    home = (site / "index.html").read_text()
    # the home page carries the README's sections (snippets), not a copy of them
    assert "What a run looks like" in home and "compile.toolchain" in home and "--8&lt;--" not in home


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    """The strict build can fail: the same config with one page linking to a page that does not exist."""
    pytest.importorskip("material", reason="mkdocs-material is in the test extra: make test-venv")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# x\n\n[gone](missing.md)\n")
    config = tmp_path / "mkdocs.yml"
    text = (ROOT / "mkdocs.yml").read_text()
    text = re.sub(r"\nnav:\n(  .*\n)*", "\nnav:\n  - Home: index.md\n", text).replace(
        "docs_dir: docs", f"docs_dir: {docs}"
    )
    config.write_text(text)
    done = _build(tmp_path / "site", config)
    assert done.returncode != 0 and "missing.md" in done.stderr
