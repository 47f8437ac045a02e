"""The code speaks of the code, not of how it was made: no comment, docstring or string of envcheck/, tests/ and
bench/, and no line of the files that build and test the images (docker/, .ci/, .github/, .devcontainer/ and the
root's Makefile, compose files and configuration), cites one of this project's own issues by its number, in any
spelling (one issue or several, with or without '#', hyphenated). A reader of the code cannot look such a number up;
the comment says the reason instead.

Upstream threads stay, written so that anyone can find them: `owner/repo#N` (`NVIDIA/nccl#354`, `pytorch#191763`,
a continuation `#1328` after one) or a URL (`https://github.com/NVIDIA/nvidia-container-toolkit/issues/251`).
A bare issue number is refused even when it means another project's thread: it does not say which project.

Real: every Python file's comments (tokenize) and string constants, docstrings included (ast); the shell scripts of
envcheck/, tests/ and bench/ and every other file named above as text, a block of '#' comment lines as one text (a
number wrapped onto the next comment line counts). Not read: the data under tests/ (field records quote third-party
logs word for word). Nothing is staged. A file whose raw text holds no issue number in any layout (the number wrapped
onto the next comment line, or into the next piece of an implicitly joined string) cannot hold one in a comment or
string either, so only the few files that do are parsed.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import ROOT

# A number in this project's tracker, in a comment's or a string's text (the `owner/repo#N` form has no "issue").
PROJECT_ISSUE = re.compile(r"\bissues?(?:\s*#|\s+|-)\d+", re.IGNORECASE)
# The same in raw source, where the number may sit past a line break, a comment's '#' or a string's quotes.
RAW_ISSUE = re.compile(r"\bissues?(?:-|[\s\"'#]+)\d+", re.IGNORECASE)
TREES = ("envcheck", "tests", "bench")  # their Python files and shell scripts
BUILD_TREES = (".ci", ".devcontainer", ".github", "docker")  # every file in them
# The root's build and configuration files (its Markdown is what users read: tests/test_user_text.py).
ROOT_FILES = (
    "Makefile",
    "compose*.yaml",
    "pyproject.toml",
    "mkdocs.yml",
    ".hadolint.yaml",
    ".env.example",
    ".dockerignore",
)
# Test data that quotes bookkeeping text on purpose (each rule's own examples of what it refuses). Only their
# string constants are let off; their comments and docstrings are checked like any other file's.
QUOTES_ON_PURPOSE = frozenset({"tests/test_user_text.py", "tests/test_code_text.py"})


def _comments(source: str) -> Iterator[tuple[int, str]]:
    """Each block of comments on consecutive lines as one text (a number wrapped onto the next line counts)."""
    start, last, parts = 0, -1, []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.COMMENT:
            continue
        line = token.start[0]
        if parts and line != last + 1:
            yield start, " ".join(parts)
            parts = []
        if not parts:
            start = line
        parts.append(token.string.lstrip("#").strip())
        last = line
    if parts:
        yield start, " ".join(parts)


def _strings(tree: ast.AST, data_too: bool) -> Iterator[tuple[int, str]]:
    """Docstrings always; other string constants (f-string parts included) when `data_too`."""
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = node.body[0] if node.body else None
            if isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant):
                docstrings.add(id(doc.value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if data_too or id(node) in docstrings:
                yield node.lineno, node.value


def _lines(source: str) -> Iterator[tuple[int, str]]:
    """A text file's lines, each block of whole-line '#' comments as one text (a number wrapped onto the next line
    counts, as in Python's comments); a line with code is read whole, a trailing comment with it."""
    start, parts = 0, []
    for number, line in enumerate(source.splitlines(), start=1):
        if line.lstrip().startswith("#"):
            if not parts:
                start = number
            parts.append(line.lstrip().lstrip("#").strip())
            continue
        if parts:
            yield start, " ".join(parts)
            parts = []
        yield number, line
    if parts:
        yield start, " ".join(parts)


def references(path: Path, rel: str) -> list[tuple[int, str, str]]:
    """(line, reference, its text) for every project issue reference in the file's comments and strings."""
    source = path.read_text(encoding="utf-8")
    if not RAW_ISSUE.search(source):
        return []
    if path.suffix != ".py":
        texts: list[tuple[int, str]] = list(_lines(source))
    else:
        texts = [*_comments(source), *_strings(ast.parse(source), rel not in QUOTES_ON_PURPOSE)]
    found = []
    for line, text in texts:
        flat = " ".join(text.split())
        found += [(line, m.group(0), flat) for m in PROJECT_ISSUE.finditer(flat)]
    return found


def code_files() -> list[tuple[Path, str]]:
    """Every file the rule reads, once (a symlink is read where it points, when that is read)."""
    paths = [p for pattern in ROOT_FILES for p in sorted(ROOT.glob(pattern))]
    for tree in TREES:
        paths += [p for p in sorted((ROOT / tree).rglob("*")) if p.suffix in (".py", ".sh")]
    for tree in BUILD_TREES:
        paths += sorted((ROOT / tree).rglob("*"))
    return [
        (p, p.relative_to(ROOT).as_posix())
        for p in paths
        if p.is_file() and not p.is_symlink() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    ]


def test_no_comment_or_string_cites_a_project_issue() -> None:
    found = [
        f"{rel}:{line}: {ref!r} in {text[:120]!r}"
        for path, rel in code_files()
        for line, ref, text in references(path, rel)
    ]
    assert not found, "say the reason instead of the issue number:\n" + "\n".join(found)


BAD = '''"""Issue 11: the work directories never outlive their launch."""
X = 1  # busy, not broken (issue 31: never a node fault)
# the give-up timings live in the rank watch since issue
# 34 split torchrun.py
def f() -> None:
    """What the H100 proof of Issue 33 found; see issues 25 and 35, issue #8 and the issue-28 probe."""
Y = f"{X} (Issue 25's 37)"
'''

GOOD = '''"""An exclusive GPU held by another job is busy, never a node fault (NVIDIA/nccl#354, #1328; pytorch#191763).

The rule NVIDIA/nvidia-container-toolkit#251 shows (https://github.com/NVIDIA/nvidia-container-toolkit/issues/251);
a known issue of the driver, as the issue shows it, in the project's issue tracker (issues/48 of gpud).
"""
X = 1  # rsyslog escapes a newline as #012; tissue 3 is no issue; round 2 of the tournament
Y = "Issues: see https://github.com/pytorch/pytorch/issues/109098"
'''


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            BAD,
            ["Issue 11", "issue 31", "issue 34", "Issue 33", "issues 25", "issue #8", "issue-28", "Issue 25"],
        ),
        (GOOD, []),
    ],
    ids=["project-issues", "upstream-references"],
)
def test_the_rule_catches_what_it_is_for(tmp_path: Path, text: str, expected: list[str]) -> None:
    """A file citing project issues in a docstring, a trailing comment, a comment wrapped over two lines and an
    f-string is refused at each; its healthy twin (upstream `owner/repo#N`, URLs, the word 'issue' without a
    number, '#012', 'round 2') passes."""
    path = tmp_path / "sample.py"
    path.write_text(text, encoding="utf-8")
    found = [ref for _, ref, _ in references(path, "sample.py")]
    assert sorted(found) == sorted(expected), found


@pytest.mark.parametrize("name", ["Dockerfile", "Makefile", "prepare.sh", "release.yml", "sshd_config"])
def test_the_scripts_and_build_files_are_read_as_text(tmp_path: Path, name: str) -> None:
    """Outside Python every line is read, a block of comment lines as one: a comment that cites a project issue, on
    one line or wrapped onto the next, is refused; the same lines with an upstream reference pass."""
    path = tmp_path / name
    path.write_text(
        "# the dev containers' part (issue 6), after the images\nRUN true  # NVIDIA/nccl#354\n"
        "# the order of the steps follows issue\n# 12's review\nRUN true  # see issue #7\n"
    )
    assert [(line, ref) for line, ref, _ in references(path, name)] == [
        (1, "issue 6"),
        (3, "issue 12"),
        (5, "issue #7"),
    ]


def test_the_rule_reads_the_build_and_ci_files() -> None:
    """The files that build and test the images are in the scan: scripts, Dockerfiles, workflows, the matrix, the
    compose files and the Makefile, each once (docker/matrix.toml is a symlink to the package's matrix)."""
    scanned = [rel for _, rel in code_files()]
    assert len(scanned) == len(set(scanned))
    assert {
        "Makefile",
        "compose.yaml",
        "pyproject.toml",
        ".ci/run",
        ".devcontainer/devcontainer.json",
        ".github/workflows/ci.yml",
        "docker/Dockerfile",
        "docker/ci/prepare-engine.sh",
        "docker/dev/sshd_config",
    } <= set(scanned)
    assert "docker/matrix.toml" not in scanned and not [r for r in scanned if "field_records" in r]
