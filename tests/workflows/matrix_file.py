"""Read docker/matrix.toml independently of envcheck, to check `envcheck matrix github` against it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
MATRIX = ROOT / "docker" / "matrix.toml"
_NEEDED = (ROOT / "envcheck" / "images" / "matrix.py", ROOT / "envcheck" / "cli.py", MATRIX)

# Before the `images` branch (matrix code + docker/matrix.toml) and main's CLI are merged these tests cannot
# run; skip visibly, naming what is missing. After the merge the files exist and the tests run for real.
requires_matrix_code = pytest.mark.skipif(
    not all(path.exists() for path in _NEEDED),
    reason="not merged yet: " + ", ".join(str(p.relative_to(ROOT)) for p in _NEEDED if not p.exists()),
)


def load_file(path: Path = MATRIX) -> dict[str, Any]:
    """The raw TOML document."""
    return tomllib.loads(path.read_text())


def matrix_rows(path: Path = MATRIX) -> list[dict[str, Any]]:
    """Rows with defaults applied (python, base_image, targets), as the contract describes."""
    if not path.exists():
        return []
    doc = load_file(path)
    defaults = doc.get("defaults", {})
    return [{**defaults, **row} for row in doc["rows"]]


def expected_pairs(path: Path = MATRIX) -> set[tuple[str, str]]:
    """Every (row id, target) the file asks for."""
    return {(row["id"], target) for row in matrix_rows(path) for target in row["targets"]}
