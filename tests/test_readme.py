"""The README's newcomer path matches the code: tags as `envcheck matrix list` gives them, compose commands in
full form, the Makefile's outputs ignored by git."""

from __future__ import annotations

import re

from envcheck.images.matrix import default_matrix_path, load_matrix
from tests.helpers import ROOT

README = (ROOT / "README.md").read_text()


def test_alias_tags_in_the_readme_point_at_the_rows_the_matrix_gives_them() -> None:
    rows = load_matrix(default_matrix_path()).rows
    owner = {tag: row.id for row in rows for tag in row.tags("runtime")}
    minor = re.search(r"`(\S+-runtime)` is the newest CUDA for torch \S+\s+\(row `(\S+)`:\s+`(\S+)`\)", README)
    latest = re.search(r"`(latest-runtime)` the row marked latest \(row `(\S+)`:\s+`(\S+)`\)", README)
    assert minor and latest
    for alias, row_id, full in (minor.groups(), latest.groups()):
        assert owner[alias] == row_id, (alias, row_id)
        assert full in next(r for r in rows if r.id == row_id).tags("runtime")


def test_every_compose_command_names_its_files() -> None:
    commands = [line for line in README.splitlines() if "docker compose " in line and "docker compose version" not in line]
    assert commands
    for line in commands:
        for command in re.findall(r"docker compose (?:.(?!docker compose))*", line):
            assert "-f compose.yaml" in command, line


def test_non_root_uid_the_download_and_the_exit_code_are_stated() -> None:
    assert "non-root" in README and "HOST_UID=1000" in README
    assert "3 GB" in README and "exits 2" in README
    assert "make compose" in README and re.search(r"^compose:", (ROOT / "Makefile").read_text(), re.M)
    assert "--ipc=host --ulimit memlock=-1" in README


def test_gitignore_covers_what_the_makefile_creates() -> None:
    ignored = (ROOT / ".gitignore").read_text().split()
    for entry in (".venv/", ".venv-test/", "bench.json", "bench-plots/", "/gpu-proof/", "*.egg-info/", "/build/"):
        assert entry in ignored, entry
