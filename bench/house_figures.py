"""The shape of envcheck/ in figures (a refactor's before/after): string-wired sites, FaultClass enum vs
string uses, the largest modules, runs of 3+ blank lines, import circles. Reads the source (ast), imports
nothing of it.

Usage: python bench/house_figures.py [--top N]. Prints figures; asserts nothing (tests/test_layout.py does).
"""

from __future__ import annotations

import argparse
import ast
import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "envcheck"
CLASSES = {"node", "image", "config"}
REF = re.compile(r"^envcheck(\.\w+)+:\w+(\.\w+)*$")  # a "module:qualname" reference
CHECK_NAME = re.compile(r"^[a-z_]+\.[a-z_.]+$")


def modules(root: Path = PACKAGE) -> list[Path]:
    """Every module of the package."""
    return sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def string_wired(tree: ast.AST) -> Counter[str]:
    """Sites that reach code or membership by a string: computed imports, module:qualname references,
    globals() lookups, check-name prefix tests and tuples of check names."""
    found: Counter[str] = Counter()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = (
                func.attr
                if isinstance(func, ast.Attribute)
                else func.id
                if isinstance(func, ast.Name)
                else ""
            )
            if name == "import_module" and node.args and not isinstance(node.args[0], ast.Constant):
                found["import_module(computed)"] += 1
            if (
                name == "startswith"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
                and CHECK_NAME.match(node.args[0].value + "x")
            ):
                found["name-prefix test"] += 1
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
            and node.value.func.id == "globals"
        ):
            found["globals()[...]"] += 1
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and REF.match(node.value):
            found["'module:qualname' string"] += 1
        elif (
            isinstance(node, ast.JoinedStr)
            and ":" in ast.unparse(node)
            and "__qualname__" in ast.unparse(node)
        ):
            found["'module:qualname' string"] += 1
        elif (
            isinstance(node, ast.Tuple)
            and len(node.elts) > 1
            and all(
                isinstance(e, ast.Constant)
                and isinstance(e.value, str)
                and CHECK_NAME.match(e.value)
                and e.value.split(".")[0] in {"node", "gpu", "dcgm", "dist", "cuda", "runtime", "compile"}
                for e in node.elts
            )
        ):
            found["tuple of check names"] += 1
    return found


def fault_class_uses(tree: ast.AST) -> Counter[str]:
    """`FaultClass.X` attribute uses vs the literals "node", "image", "config" where a fault class goes."""
    found: Counter[str] = Counter()
    parents = _parents(tree)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "FaultClass"
        ):
            found["enum"] += 1
        if not (isinstance(node, ast.Constant) and node.value in CLASSES):
            continue
        parent = parents.get(node)
        if isinstance(parent, ast.keyword):
            if parent.arg and ("fault" in parent.arg or "klass" in parent.arg):
                found["string"] += 1
        elif isinstance(parent, ast.Call):
            func = parent.func
            name = (
                func.attr
                if isinstance(func, ast.Attribute)
                else func.id
                if isinstance(func, ast.Name)
                else ""
            )
            if node in parent.args and name not in {"add_parser", "add_argument", "get", "run", "setdefault"}:
                found["string"] += 1
        elif isinstance(parent, (ast.Compare, ast.BoolOp, ast.IfExp, ast.AnnAssign, ast.Return)):
            found["string"] += 1
    return found


def blank_runs(text: str) -> int:
    """Runs of three or more blank lines."""
    runs, blank = 0, 0
    for line in text.splitlines():
        blank = blank + 1 if not line.strip() else 0
        runs += blank == 3
    return runs


def main() -> None:
    """Print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args()
    wired: Counter[str] = Counter()
    classes: Counter[str] = Counter()
    sizes: list[tuple[int, str]] = []
    runs = 0
    for path in modules():
        text = path.read_text()
        tree = ast.parse(text)
        wired += string_wired(tree)
        classes += fault_class_uses(tree)
        sizes.append((len(text.splitlines()), str(path.relative_to(ROOT))))
        runs += blank_runs(text)
    tests_runs = sum(blank_runs(p.read_text()) for p in modules(ROOT / "tests"))
    print("string-wired sites:", sum(wired.values()), dict(sorted(wired.items())))
    print(f"FaultClass: {classes['enum']} enum uses, {classes['string']} string uses")
    print(f"runs of 3+ blank lines: {runs} in envcheck/, {tests_runs} in tests/")
    print(f"modules: {len(sizes)}, over 300 lines: {sum(n > 300 for n, _ in sizes)}")
    for lines, name in sorted(sizes, reverse=True)[: args.top]:
        print(f"  {lines:5d} {name}")


if __name__ == "__main__":
    main()
