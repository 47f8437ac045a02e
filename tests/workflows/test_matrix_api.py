"""The Python side of the matrix contract the workflows rely on (`github_matrix(load_matrix(...))`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from envcheck.core.errors import UsageError
from tests.workflows.matrix_file import MALFORMED, MATRIX, expected_pairs, requires_matrix_code

pytestmark = requires_matrix_code


def test_github_matrix_covers_every_row_and_target_of_the_file() -> None:
    from envcheck.images.matrix import github_matrix, load_matrix

    include = github_matrix(load_matrix(MATRIX))["include"]
    pairs = [(entry["row"], entry["target"]) for entry in include]
    assert sorted(pairs) == sorted(expected_pairs()) and len(pairs) == len(set(pairs))


def test_real_file_is_not_trivially_small() -> None:
    assert len(expected_pairs()) >= 2


@pytest.mark.parametrize(("mutate", "names"), MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_file_raises_a_one_line_usage_error(tmp_path: Path, mutate, names: list[str]) -> None:
    from envcheck.images.matrix import load_matrix

    bad = tmp_path / "matrix.toml"
    bad.write_text(mutate(MATRIX.read_text()))
    assert bad.read_text() != MATRIX.read_text(), "the mutation must change the file"
    with pytest.raises(UsageError) as caught:
        load_matrix(bad)
    message = caught.value.message
    assert "\n" not in message and "matrix.toml" in message and caught.value.exit_code == 2
    for name in names:
        assert name in message, message


def _script(name: str):
    import importlib.util

    path = MATRIX.parents[1] / ".github" / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_real_entry_becomes_valid_metadata_action_tags() -> None:
    from envcheck.images.matrix import github_matrix, load_matrix

    matrix_entry = _script("matrix_entry")
    for entry in github_matrix(load_matrix(MATRIX))["include"]:
        lines = matrix_entry.metadata_tags(entry["tags"]).splitlines()[1:-1]
        assert [ln.removeprefix("type=raw,value=") for ln in lines[:-1]] == entry["tags"].split(",")


def test_ci_picks_the_latest_runtime_row() -> None:
    import json

    from envcheck.images.matrix import github_matrix, load_matrix

    doc = json.dumps(github_matrix(load_matrix(MATRIX), target="runtime"))
    picked = _script("matrix_entry").pick_entry(doc).splitlines()
    latest = [row.id for row in load_matrix(MATRIX).rows if row.latest]
    assert picked[0] == f"row={latest[0]}" and picked[1] == "target=runtime"
