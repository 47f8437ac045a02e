"""The fault corpus (tests/numerics/corpus): every mechanism harms a real training script, and the full
level catches each one by its named check; the quick level catches what docs/numerics-corpus.md says it does (its
catch rate and catchers are printed: run with -s to see them)."""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

import pytest
import torch

from envcheck import numerics
from envcheck.checks.check_registry import registry
from envcheck.checks.torch_compile.toolchain import default_cache_name
from envcheck.core.check import Context, Level
from envcheck.core.execute import execute
from envcheck.core.result import Status
from tests.helpers import ROOT
from tests.numerics.corpus.mechanisms import CORPUS, Mechanism

# Any registered check may be a mechanism's catcher (ddp.differential and compile.train_step live outside
# the numerics package); the quick level's catch rate counts the numerics quick checks, as before (the DDP and
# compile checks are full level only).
SPECS = dict(registry())
QUICK = [s for s in numerics.CHECKS if s.level is Level.QUICK]
# long: every mechanism through the full level keeps a core busy for minutes in all; `make test` runs it beside the
# Docker tests
pytestmark = pytest.mark.long


@pytest.fixture(scope="module")
def inductor_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("inductor")


@pytest.fixture(autouse=True)
def compile_in_a_cache_of_this_module(inductor_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """compile.train_step runs in this process here: its compiles go in a cache of this module's (warm after the
    first), not in Inductor's default one in the system temp dir, which would outlive the suite. Both of its places:
    TORCHINDUCTOR_CACHE_DIR, and the temp dir its C++ precompiled headers go in (<temp>/torchinductor_<user>,
    whatever TORCHINDUCTOR_CACHE_DIR says; tempfile caches that dir, so TMPDIR would not move it). Inductor's codecache
    fixes the headers' dir when it is first imported: if that happened before, its constants are moved too."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(inductor_cache))
    monkeypatch.setattr(tempfile, "tempdir", str(inductor_cache))
    codecache = sys.modules.get("torch._inductor.codecache")
    if codecache is not None and hasattr(codecache, "_HEADER_DIR"):
        headers = inductor_cache / default_cache_name() / "precompiled_headers"
        monkeypatch.setattr(codecache, "_HEADER_DIR", str(headers))
        monkeypatch.setattr(codecache, "_HEADER_LOCK_DIR", str(headers / "locks"))


def _outcome(m: Mechanism, injected: bool) -> torch.Tensor:
    if not injected:
        return m.script()
    with m.inject():
        return m.script()


def test_corpus_is_large_and_cited() -> None:
    assert len(CORPUS) >= 50
    assert all(m.source.startswith("https://github.com/pytorch/pytorch/") for m in CORPUS)
    assert len({m.name for m in CORPUS}) == len(CORPUS)
    assert {m.check for m in CORPUS} <= set(SPECS)


@pytest.mark.parametrize("m", CORPUS, ids=[m.name for m in CORPUS])
def test_mechanism_harms_training(m: Mechanism) -> None:
    """Premise: the injected bug changes what a small real training run produces, beyond float32 noise."""
    healthy, broken = _outcome(m, False), _outcome(m, True)
    same = healthy.shape == broken.shape and torch.allclose(
        healthy, broken, rtol=1e-3, atol=1e-5, equal_nan=True
    )
    assert not same, f"{m.name}: training outcome unchanged ({healthy[:4]} vs {broken[:4]})"


@pytest.mark.parametrize("m", CORPUS, ids=[m.name for m in CORPUS])
def test_mechanism_caught_at_full_level(m: Mechanism) -> None:
    with m.inject():
        result = execute(SPECS[m.check], Context(level=Level.FULL, allow_cpu=True))
    assert result.status is Status.FAIL, (m.name, m.check, result.status, result.summary)


def quick_catches(m: Mechanism) -> list[str]:
    """The quick-level checks that fail with this mechanism injected."""
    with m.inject():
        return [
            s.name
            for s in QUICK
            if execute(s, Context(level=Level.QUICK, allow_cpu=True)).status is Status.FAIL
        ]


def documented_quick_catches() -> dict[str, list[str]]:
    """docs/numerics-corpus.md's table: each mechanism's quick-level catchers ("yes (a, b)"), [] where it says "no"."""
    found = {}
    for line in (ROOT / "docs" / "numerics-corpus.md").read_text().splitlines():
        # a pipe inside a cell is written \|
        cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        if len(cells) == 5 and (cells[2] == "no" or cells[2].startswith("yes (")):
            found[cells[0]] = [] if cells[2] == "no" else cells[2][len("yes (") : -1].split(", ")
    return found


def test_quick_level_catches_what_the_docs_say(capsys: pytest.CaptureFixture[str]) -> None:
    """The catch rate and, per mechanism, the quick checks that catch it are what docs/numerics-corpus.md states."""
    caught = {m.name: quick_catches(m) for m in CORPUS}
    count = sum(bool(v) for v in caught.values())
    with capsys.disabled():
        print(f"\nquick-level catch rate: {count / len(CORPUS):.0%} ({count}/{len(CORPUS)})")
        for name, by in caught.items():
            print(f"  {'caught' if by else 'missed'}  {name}  {', '.join(by)}")
    documented = {n: sorted(by) for n, by in documented_quick_catches().items()}
    assert {n: sorted(by) for n, by in caught.items()} == documented
    assert (
        f"Quick level: **{count}/{len(CORPUS)} caught ({count / len(CORPUS):.0%})**"
        in (ROOT / "docs" / "numerics-corpus.md").read_text()
    )


def test_healthy_quick_level_catches_nothing() -> None:
    """No false failure: with nothing injected, every quick check passes."""
    bad = [
        s.name
        for s in QUICK
        if execute(s, Context(level=Level.QUICK, allow_cpu=True)).status is not Status.PASS
    ]
    assert not bad
