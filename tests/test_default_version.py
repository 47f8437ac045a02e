"""One default version everywhere: the matrix's `latest` row is what `make verify` checks, what `make image` builds,
what `.env.example` and compose start, what the Dockerfile builds without build args (.devcontainer/) and what the
README and docs show. This test fails, naming the file and line, when any of them drifts from the matrix."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from envcheck.images.matrix import Row, default_matrix_path, load_matrix
from tests.helpers import ROOT


def latest() -> Row:
    (row,) = [r for r in load_matrix(default_matrix_path()).rows if r.latest]
    return row


LATEST = latest()
FULL = f"{LATEST.torch}-cuda{LATEST.cuda}"  # the full tag's version part: 2.14.1-cuda13.0

# A row id after ROW=, a full image version anywhere (2.11.0-cuda13.0), a row alias (2.11-cuda13.0).
ROW_ARG = re.compile(r"\b(?:ROW|VERIFY_ROW)=(\d+\.\d+-cu\d+)")
FULL_TAG = re.compile(r"\b(\d+\.\d+\.\d+-cuda\d+\.\d+)(?=-|\b)")
# Pages that show other rows on purpose: the tag scheme's examples, measured runs of a named row, generated
# reference pages listing every row, the GPU evidence of a dated run, the changelog's history.
OTHER_ROWS_ON_PURPOSE = {
    "docs/matrix.md",
    "docs/publishing.md",
    "docs/benchmarks.md",
    "docs/support.md",
    "docs/reference/matrix.md",
    "CHANGELOG.md",
}


def pages() -> list[Path]:
    """README, the docs (less the pages above and the raw GPU evidence), the Makefile, .env.example, compose, the
    devcontainer."""
    found = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "Makefile", ROOT / ".env.example"]
    found += sorted(ROOT.glob("compose*.yaml")) + sorted((ROOT / ".devcontainer").glob("*.json"))
    found += [p for p in sorted((ROOT / "docs").rglob("*.md")) if "gpu-evidence" not in p.parts]
    return [p for p in found if str(p.relative_to(ROOT)) not in OTHER_ROWS_ON_PURPOSE]


def drift(label: str, text: str) -> list[str]:
    """Every line of `text` that names a row or an image version other than the latest row's. VERIFY_ROW= picks
    another row on purpose and is not a default."""
    out = []
    for n, line in enumerate(text.splitlines(), start=1):
        for m in ROW_ARG.finditer(line):
            if m.group(1) != LATEST.id and not m.group(0).startswith("VERIFY_ROW="):
                out.append(f"{label}:{n}: {m.group(0)} (the default row is {LATEST.id})")
        for m in FULL_TAG.finditer(line):
            if m.group(1) != FULL:
                out.append(f"{label}:{n}: {m.group(1)} (the default image is {FULL})")
    return out


@pytest.mark.parametrize("path", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_default_names_the_matrix_latest_row(path: Path) -> None:
    problems = drift(str(path.relative_to(ROOT)), path.read_text(encoding="utf-8"))
    assert not problems, "\n".join(problems)


def test_the_defaults_are_the_latest_row() -> None:
    """The settings themselves, not only their mentions: Makefile's ROW, .env.example's tag, compose's default and
    the Dockerfile's ARG defaults (the build .devcontainer/ runs)."""
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^ROW \?= (\S+)$", makefile, re.M)[1] == LATEST.id  # type: ignore[index]
    env = (ROOT / ".env.example").read_text()
    assert re.search(r"^ENVCHECK_TAG=(\S+)$", env, re.M)[1] == FULL  # type: ignore[index]
    compose = (ROOT / "compose.yaml").read_text()
    defaults = set(re.findall(r"\$\{ENVCHECK_TAG:-([^}]+)\}", compose))
    assert defaults == {"latest"} and "latest-runtime" in LATEST.tags(
        "runtime"
    )  # `latest` is this row's alias
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    args = dict(re.findall(r"^ARG (TORCH\w*_VERSION|CUDA_VERSION)=(.*)$", dockerfile, re.M))
    assert args == {
        "TORCH_VERSION": LATEST.torch,
        "TORCHVISION_VERSION": LATEST.torchvision,
        "TORCHAUDIO_VERSION": LATEST.torchaudio,
        "CUDA_VERSION": LATEST.cuda,
    }


def test_the_drift_check_catches_what_the_first_user_met() -> None:
    """`make image` defaulting to 2.11-cu130 and .env.example to 2.11.0-cuda13.0 while `make verify` used the latest
    row: the check names both lines; the latest row's own lines pass."""
    problems = drift(
        "Makefile", "ROW ?= 2.11-cu130\nmake image ROW=2.11-cu130\nENVCHECK_TAG=2.11.0-cuda13.0\n"
    )
    assert [p.split(": ", 1)[0] for p in problems] == ["Makefile:2", "Makefile:3"], problems
    fine = (
        f"make image ROW={LATEST.id}\nENVCHECK_TAG={FULL}\nenvcheck:{FULL}-runtime\nVERIFY_ROW=2.11-cu130\n"
    )
    assert drift("x", fine) == []
