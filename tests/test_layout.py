"""The rooms of envcheck/ (README: Repository layout): each imports only the rooms below it, no module name repeats
across rooms, test-only fault injection stays in tests/, and no room outgrows a third of the package."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

from tests.helpers import ROOT

PACKAGE = ROOT / "envcheck"
# A room may import its own floor and the floors below it (a higher number is a higher floor).
# bench (the measurement units: timing, matmul, memory copies, peaks) sits beside collectives, below checks, so a
# check can measure with the same units `envcheck bench` uses (perf.relative); `envcheck bench` itself is app/bench.
FLOORS = {"core": 0, "probe": 1, "collectives": 2, "reference": 2, "bench": 2, "checks": 3, "evidence": 4, "report": 4,
          "cluster": 4, "images": 5, "host": 5, "app": 6}


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _room(path: Path) -> str | None:
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 else None


def _imported_rooms(path: Path) -> set[str]:
    rooms = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
            [a.name for a in node.names] if isinstance(node, ast.Import) else []
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
    assert {str(p.relative_to(ROOT)): _imported_rooms(p) - {"core"} for p in _modules()
            if _room(p) == "core" and _imported_rooms(p) - {"core"}} == {}


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


def test_no_room_holds_more_than_35_percent_of_the_lines() -> None:
    lines = Counter()
    for path in _modules():
        lines[_room(path) or "(top)"] += len(path.read_text().splitlines())
    total = sum(lines.values())
    share = {room: round(100 * n / total, 1) for room, n in lines.items()}
    assert max(share.values()) < 35, share
