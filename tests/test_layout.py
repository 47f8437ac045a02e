"""The rooms of envcheck/ (docs/architecture.md: Repository layout): each imports only the rooms below it, no module name repeats
across rooms, no import circle runs among modules (imports inside functions count), test-only fault injection
stays in tests/, no module runs over 300 formatted lines without saying why, and no room outgrows a third of the
package."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

from tests.helpers import ROOT

PACKAGE = ROOT / "envcheck"
# A room may import its own floor and the floors below it (a higher number is a higher floor).
# perf (the measurement units: timing, matmul, memory copies, peaks) sits beside collectives, below checks, so a
# check can measure with the same units `envcheck bench` uses (perf.relative); `envcheck bench` itself is app/bench.
# numerics (the training step's arithmetic against reference/) is a room of checks beside checks, on its floor.
FLOORS = {
    "core": 0,
    "probe": 1,
    "collectives": 2,
    "reference": 2,
    "perf": 2,
    "checks": 3,
    "numerics": 3,
    "burn": 3,
    "evidence": 4,
    "report": 4,
    "cluster": 4,
    "images": 5,
    "host": 5,
    "app": 6,
}


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _room(path: Path) -> str | None:
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 else None


def _imported_rooms(path: Path) -> set[str]:
    rooms = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = (
            [node.module or ""]
            if isinstance(node, ast.ImportFrom)
            else [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else []
        )
        for name in names:
            parts = name.split(".")
            if parts[0] == "envcheck" and len(parts) > 1 and parts[1] in FLOORS:
                rooms.add(parts[1])
    return rooms


def test_no_room_imports_a_room_above_it() -> None:
    upward = []
    for path in _modules():
        room = _room(path)
        rel = str(path.relative_to(ROOT))
        if room not in FLOORS:
            continue
        upward += [f"{rel} -> {other}" for other in _imported_rooms(path) if FLOORS[other] > FLOORS[room]]
    assert upward == []


def test_core_imports_no_other_room() -> None:
    assert {
        str(p.relative_to(ROOT)): _imported_rooms(p) - {"core"}
        for p in _modules()
        if _room(p) == "core" and _imported_rooms(p) - {"core"}
    } == {}


def test_no_module_name_repeats_across_rooms() -> None:
    names = Counter()
    rooms: dict[str, set[str]] = {}
    for path in _modules():
        if path.name != "__init__.py" and _room(path):
            rooms.setdefault(path.name, set()).add(str(_room(path)))
            names[path.name] += 1
    assert {n: sorted(r) for n, r in rooms.items() if len(r) > 1} == {}


def test_test_only_fault_injection_is_not_in_the_package() -> None:
    shipped = [str(p.relative_to(ROOT)) for p in _modules() if "ENVCHECK_TEST_FAULT" in p.read_text()]
    assert shipped == []


# Counted in formatted lines: the tree is kept as `ruff format` writes it (line length 110; `make lint` and CI check
# it), so a module's length is the formatter's, not its author's line breaks.
MAX_LINES = 300
REASON = "Over 300 lines:"  # how a module's docstring says why it is longer


def test_no_module_is_over_300_formatted_lines_without_a_reason_at_its_top() -> None:
    long = {
        str(p.relative_to(ROOT)): n for p in _modules() if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert {
        p: n
        for p, n in long.items()
        if REASON not in (ast.get_docstring(ast.parse((ROOT / p).read_text())) or "")
    } == {}


def test_no_room_holds_more_than_35_percent_of_the_lines() -> None:
    lines = Counter()
    for path in _modules():
        lines[_room(path) or "(top)"] += len(path.read_text().splitlines())
    total = sum(lines.values())
    share = {room: round(100 * n / total, 1) for room, n in lines.items()}
    assert max(share.values()) < 35, share


def _module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported_modules(path: Path, known: set[str], root: Path) -> set[str]:
    """The package modules `path` imports anywhere in its body (inside functions too): `from a.b import c`
    names the module a.b.c where there is one, else a.b."""

    def owner(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    me = _module_name(path, root)
    found: set[str | None] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(owner(a.name) for a in node.names if a.name.startswith("envcheck."))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = me if path.name == "__init__.py" else me.rpartition(".")[0]
                for _ in range(node.level - 1):
                    package = package.rpartition(".")[0]
                base = f"{package}.{base}".rstrip(".")
            if base.split(".")[0] == "envcheck":
                found.update(owner(f"{base}.{a.name}") for a in node.names)
    return {m for m in found if m is not None and m != me}


def import_circles(paths: list[Path], root: Path = ROOT) -> list[list[str]]:
    """Every set of modules that import one another round (strongly connected, Tarjan), sorted."""
    graph = {_module_name(p, root): set[str]() for p in paths}
    for path in paths:
        graph[_module_name(path, root)] = _imported_modules(path, set(graph), root)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            members = stack[stack.index(node) :]
            del stack[stack.index(node) :]
            if len(members) > 1:
                circles.append(sorted(members))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(circles)


def test_no_import_circle_counting_imports_inside_functions() -> None:
    assert import_circles(_modules()) == []


def test_the_circle_finder_sees_an_import_hidden_in_a_function(tmp_path: Path) -> None:
    """The healthy twin's guard: a circle closed only by a function-level import is found."""
    room = tmp_path / "envcheck" / "app"
    room.mkdir(parents=True)
    (room / "__init__.py").write_text("")
    (room / "a.py").write_text("from envcheck.app.b import f\n")
    (room / "b.py").write_text("def f():\n    from envcheck.app import a\n    return a\n")
    (room / "c.py").write_text("from envcheck.app import b\n")
    assert import_circles(sorted(room.glob("*.py")), tmp_path) == [["envcheck.app.a", "envcheck.app.b"]]


# Code is reached by reference: no import of a computed module name and no globals() lookup in the package. The
# sites left, each with its reason (the fork-server boundary is one):
COMPUTED_IMPORTS_ALLOWED = {
    # the worker process resolves a check function or hook sent to it as `module:qualname` (a fresh interpreter
    # under the fork server; tests' ad-hoc specs are not in any registry)
    "envcheck/core/isolation/worker.py",
    # the fork server imports the modules the specs ask it to preload (`CheckSpec.preload`: data naming modules)
    "envcheck/core/isolation/forkserver.py",
    # names from torch's own option databases (torch.optim.<module>, torch.testing._internal.<module>): torch's
    # namespace, as torch's data names it, not envcheck's code
    "envcheck/numerics/optim_differential.py",
    "envcheck/reference/torch_db.py",
}


def string_reached(path: Path) -> list[str]:
    """`import_module(<not a literal>)` calls and `globals()[...]` lookups in `path`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            func = node.func
            name = (
                func.attr
                if isinstance(func, ast.Attribute)
                else func.id
                if isinstance(func, ast.Name)
                else ""
            )
            if (
                name in ("import_module", "__import__")
                and node.args
                and not isinstance(node.args[0], ast.Constant)
            ):
                found.append(f"{name} at line {node.lineno}")
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
            and node.value.func.id == "globals"
        ):
            found.append(f"globals()[...] at line {node.lineno}")
    return found


def test_no_code_is_reached_by_a_computed_name() -> None:
    found = {str(p.relative_to(ROOT)): sites for p in _modules() if (sites := string_reached(p))}
    assert {p: s for p, s in found.items() if p not in COMPUTED_IMPORTS_ALLOWED} == {}
    assert set(found) == COMPUTED_IMPORTS_ALLOWED  # an allowance nobody needs any more goes too


def test_a_computed_import_is_found(tmp_path: Path) -> None:
    """The guard's healthy twin: both forms are caught, a literal import_module is not."""
    module = tmp_path / "m.py"
    module.write_text(
        'import importlib\nstep = "x"\nimportlib.import_module(f"envcheck.collectives.{step}")\n'
        'importlib.import_module("docker")\nglobals()[f"cmd_{step}"]\n'
    )
    assert string_reached(module) == ["import_module at line 3", "globals()[...] at line 5"]
