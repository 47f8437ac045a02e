"""The finding-code table (envcheck/cluster/finding_codes.py): every code any module emits has its row, read from
the source (a static scan: `code=` arguments, assignments to `code`, a `code` property, and the modules' named code
constants), its fault class is the one the emitting site gives, policy and severity read codes the table has, and the
reference page renders one row per code. No layer is staged: the package's own source is scanned."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from envcheck.checks.check_registry import registry
from envcheck.checks.cuda.finding import LAYER_CODES
from envcheck.cluster import policy
from envcheck.cluster.finding_codes import TABLE, lookup, markdown
from envcheck.cluster.fleet import learn
from envcheck.cluster.severity import SEVERITY
from envcheck.perf import relative
from tests.helpers import ROOT

CODE = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$")
NOT_FINDINGS = {
    "app",
    "host",
    "images",
}  # rooms whose dotted constants are labels and file names, not findings


def _module(path: Path, root: Path) -> str:
    return ".".join(path.relative_to(root.parent).with_suffix("").parts).removesuffix(".__init__")


class _Source:
    """Module-level string constants and `from x import y` names of a package, to resolve a code's name."""

    def __init__(self, root: Path) -> None:
        self.trees = {
            _module(p, root): ast.parse(p.read_text())
            for p in sorted(root.rglob("*.py"))
            if "__pycache__" not in p.parts
        }
        self.consts: dict[str, dict[str, str]] = {}
        self.imports: dict[str, dict[str, tuple[str, str]]] = {}
        for mod, tree in self.trees.items():
            self.consts[mod] = {
                n.targets[0].id: n.value.value
                for n in tree.body
                if isinstance(n, ast.Assign)
                and len(n.targets) == 1
                and isinstance(n.targets[0], ast.Name)
                and isinstance(n.value, ast.Constant)
                and isinstance(n.value.value, str)
            }
            self.imports[mod] = {
                a.asname or a.name: (n.module, a.name)
                for n in ast.walk(tree)
                if isinstance(n, ast.ImportFrom) and n.module
                for a in n.names
            }

    def resolve(self, mod: str, name: str, depth: int = 0) -> str | None:
        if name in self.consts.get(mod, {}):
            return self.consts[mod][name]
        if name in self.imports.get(mod, {}) and depth < 5:
            return self.resolve(*self.imports[mod][name], depth + 1)
        return None

    def codes_in(self, mod: str, node: ast.AST) -> list[str]:
        """The codes an expression can give: literals and resolved names, an f-string with `<n>` where it varies."""
        if isinstance(node, ast.JoinedStr):
            parts = [
                str(v.value)
                if isinstance(v, ast.Constant)
                else (self.resolve(mod, v.value.id) or "<n>")
                if isinstance(v, ast.FormattedValue) and isinstance(v.value, ast.Name)
                else "<n>"
                for v in node.values
            ]
            return ["".join(parts)]
        found = []
        for sub in ast.walk(node):
            value = (
                sub.value
                if isinstance(sub, ast.Constant)
                else self.resolve(mod, sub.id)
                if isinstance(sub, ast.Name)
                else None
            )
            if isinstance(value, str) and CODE.match(value):
                found.append(value)
        return found


def emitted(root: Path, check_names: set[str]) -> dict[str, list[str]]:
    """Every code the package at `root` emits -> where (module:line)."""
    src = _Source(root)
    out: dict[str, list[str]] = {}
    for mod, tree in src.trees.items():
        room = mod.split(".")[1] if mod.count(".") else ""
        sites: list[ast.AST] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.keyword) and node.arg == "code":
                sites.append(node.value)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    names = target.elts if isinstance(target, ast.Tuple) else [target]
                    values = (
                        node.value.elts
                        if isinstance(node.value, ast.Tuple) and isinstance(target, ast.Tuple)
                        else [node.value]
                    )
                    sites += [
                        v
                        for t, v in zip(names, values, strict=False)
                        if isinstance(t, ast.Name) and t.id == "code"
                    ]
            elif isinstance(node, ast.FunctionDef) and node.name == "code":
                sites += [
                    r.value for r in ast.walk(node) if isinstance(r, ast.Return) and r.value is not None
                ]
        for site in sites:
            for code in src.codes_in(mod, site):
                out.setdefault(code, []).append(f"{mod}:{getattr(site, 'lineno', 0)}")
        if room not in NOT_FINDINGS:
            for name, value in src.consts[mod].items():
                if CODE.match(value) and name != "NAME" and value not in check_names:
                    out.setdefault(value, []).append(f"{mod}:{name}")
    return out


def _check_names() -> set[str]:
    return set(registry())


DEFAULT = "<check>.<status>"  # the table's catch-all: only Result.named's `<check>.<status>` may land there


def _missing(codes: dict[str, list[str]]) -> dict[str, list[str]]:
    def row(code: str) -> str | None:
        found = lookup(code.replace("<n>", "x"))
        return found.code if found is not None else None

    return {
        c: where for c, where in codes.items() if row(c) is None or (row(c) == DEFAULT and c != "<n>.<n>")
    }


def test_every_code_any_module_emits_is_in_the_table() -> None:
    codes = emitted(ROOT / "envcheck", _check_names())
    assert len(codes) > 80  # the scan sees the codes (a scan that finds none would pass vacuously)
    assert _missing(codes) == {}


def test_a_code_missing_from_the_table_is_found(tmp_path: Path) -> None:
    pkg = tmp_path / "envcheck"
    (pkg / "checks").mkdir(parents=True)
    (pkg / "checks" / "made.py").write_text(
        'from envcheck.core.result import FaultClass, failed\nMADE_UP = "made.up_code"\n\n\n'
        'def check(ctx):\n    return failed("x", "y", fault_class=FaultClass.NODE, code=MADE_UP)\n\n\n'
        'def other(ctx, n):\n    return failed("x", "y", code=f"made.family.{n}")\n'
    )
    assert set(_missing(emitted(pkg, set()))) == {"made.up_code", "made.family.<n>"}


def test_codes_from_data_tables_are_in_the_table() -> None:
    exact = {row.code for row in TABLE}
    assert set(relative.CODES) | set(learn.CODES) | set(LAYER_CODES.values()) <= exact


def test_an_emitting_site_gives_the_class_its_row_names() -> None:
    src = _Source(ROOT / "envcheck")
    wrong = []
    for mod, tree in src.trees.items():
        for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
            kw = {k.arg: k.value for k in call.keywords}
            given = kw.get("fault_class")
            if "code" not in kw or not (
                isinstance(given, ast.Attribute)
                and isinstance(given.value, ast.Name)
                and given.value.id == "FaultClass"
            ):
                continue
            for code in src.codes_in(mod, kw["code"]):
                row = lookup(code)
                if row is not None and row.fault_class is not None and row.fault_class.name != given.attr:
                    wrong.append(f"{mod}:{call.lineno} {code}: {given.attr}, table {row.fault_class.name}")
    assert wrong == []


def test_policy_and_severity_read_codes_the_table_has() -> None:
    exact = [k for k in SEVERITY if not k.endswith(".*")]
    assert _missing(dict.fromkeys([*exact, *policy.LIMIT_CODES], [""])) == {}
    prefixes = [k[:-1] for k in SEVERITY if k.endswith(".*")]  # a family prefix names rows of the table
    assert [p for p in prefixes if not any(row.code.startswith(p) for row in TABLE)] == []
    policy_source = (ROOT / "envcheck" / "cluster" / "policy.py").read_text()
    severity_source = (ROOT / "envcheck" / "cluster" / "severity.py").read_text()
    exact = {row.code for row in TABLE if "<" not in row.code}
    # no code written as a literal there: they name the emitting modules' constants (families stay prefixes)
    assert [c for c in exact if f'"{c}"' in policy_source] == []
    assert [c for c in exact if f'"{c}"' in severity_source] == [
        "dist.busbw.fail"
    ]  # a default <check>.fail code


def test_the_reference_page_has_one_row_per_code() -> None:
    page = markdown()
    rows = [line for line in page.splitlines() if line.startswith("| `")]
    assert len(rows) == len(TABLE) == len({row.code for row in TABLE})
    assert "| `gpu.lost` | a GPU on the PCI bus that NVML no longer lists" in page
    assert "| `xid.<xid>` |" in page and "| node |" in page
    assert all(line.count(" | ") == 3 for line in rows)  # a `|` inside a cell is escaped
