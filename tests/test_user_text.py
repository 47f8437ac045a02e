"""What a user reads speaks of the product, not of how it was made: no issue numbers and no seed documents in the
README, the changelog, the documentation pages (the generated reference included: every check's description, every
finding code, every CLI flag's help) or the bench's published-figure sources. Upstream references such as
`pytorch/pytorch#168065` name a public thread and stay."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers import ROOT

# A project issue number in any spelling (one or several, with or without '#') and the seed documents' names:
# the project's own bookkeeping.
OWN_BOOKKEEPING = re.compile(r"\bissues? #?\d+|\bseeds?/\d|\bseeds via\b", re.IGNORECASE)
# The committed GPU proof folders are raw logs of one run, kept unedited (mkdocs lists them outside the nav).
RAW_EVIDENCE = ROOT / "docs" / "gpu-evidence"


def user_pages() -> list[Path]:
    """Every page a user reads: README, CHANGELOG, CONTRIBUTING and the documentation site's Markdown."""
    pages = [ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "CONTRIBUTING.md"]
    pages += [p for p in sorted((ROOT / "docs").rglob("*.md")) if RAW_EVIDENCE not in p.parents]
    return pages


@pytest.mark.parametrize("page", user_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_issue_numbers_or_seed_documents_in_what_users_read(page: Path) -> None:
    found = [
        f"{page.relative_to(ROOT)}:{n}: {m.group(0)!r} in {line.strip()[:100]!r}"
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1)
        for m in OWN_BOOKKEEPING.finditer(line)
    ]
    assert not found, "\n".join(found)


def test_the_rule_catches_what_it_is_for() -> None:
    """The pattern finds the texts users met (page titles, the bench's claim sources) and leaves upstream links."""
    for bad in (
        "(issue 35)",
        "(issues 25 and 35)",
        "[seeds via issue #8; seeds/002 (AMP section)]",
        "Issue 25's 37",
    ):
        assert OWN_BOOKKEEPING.search(bad), bad
    for fine in (
        "pytorch/pytorch#168065",
        "NVIDIA/nccl#354 and #1328",
        "an issue tracker",
        "docker-stacks#2378",
    ):
        assert not OWN_BOOKKEEPING.search(fine), fine


def test_bench_sources_name_where_a_figure_was_published() -> None:
    from envcheck.perf.training_claims import AMP_CLAIM, CKPT_CLAIM, CLIP_CLAIM

    for source, text in (AMP_CLAIM, CLIP_CLAIM, CKPT_CLAIM):
        assert not OWN_BOOKKEEPING.search(source + text) and "seed" not in source.lower()
