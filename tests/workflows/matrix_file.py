"""Read docker/matrix.toml independently of envcheck, to check `envcheck matrix github` against it."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
MATRIX = ROOT / "docker" / "matrix.toml"
_MATRIX_CODE = ROOT / "envcheck" / "images" / "matrix.py"
_IMAGES_CLI = ROOT / "envcheck" / "app" / "images.py"


def _missing(*paths: Path) -> list[str]:
    return [str(path.relative_to(ROOT)) for path in paths if not path.exists()]


def _cli_missing() -> list[str]:
    missing = _missing(_MATRIX_CODE, MATRIX, _IMAGES_CLI)
    if not missing and 'add_parser("matrix"' not in _IMAGES_CLI.read_text():
        missing.append("the `envcheck matrix` subcommand in envcheck/app/images.py")
    return missing


# Before the `images` branch is merged these cannot run; they skip visibly, naming what is missing.
# Once the files exist they run for real (a broken matrix then fails, it does not skip).
requires_matrix_code = pytest.mark.skipif(
    bool(_missing(_MATRIX_CODE, MATRIX)), reason=f"not merged yet: {_missing(_MATRIX_CODE, MATRIX)}"
)
requires_matrix_cli = pytest.mark.skipif(bool(_cli_missing()), reason=f"not merged yet: {_cli_missing()}")


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


def _mutate_first_row(change: Callable[[str], str]) -> Callable[[str], str]:
    def mutate(text: str) -> str:
        head, _, rest = text.partition("[[rows]]")
        block, sep, tail = rest.partition("[[rows]]")
        return head + "[[rows]]" + change(block) + sep + tail

    return mutate


# Malformed variants of the real file -> the field names the one-line error must mention.
MALFORMED: dict[str, tuple[Callable[[str], str], list[str]]] = {
    "missing-torch": (_mutate_first_row(lambda b: b.replace("\ntorch =", "\n# torch =", 1)), ["torch"]),
    "bad-id": (_mutate_first_row(lambda b: b.replace('id = "', 'id = "Bad Id ', 1)), ["id"]),
    "torchvision-mismatch": (
        _mutate_first_row(lambda b: b.replace('torchvision = "', 'torchvision = "9.', 1)),
        ["torchvision"],
    ),
    "duplicate-id": (_mutate_first_row(lambda b: b + "[[rows]]" + b), ["id"]),
    "toml-syntax": (lambda text: text.replace("[[rows]]", "[[rows]", 1), []),
}
