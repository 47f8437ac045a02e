"""The test suite's cost table from pytest's own figures: per directory, per file and per test (top N), the
kinds of test (the phase and markers `make test` runs them by) and, with a `--durations=0` log, the setups that
carry a session's one-off costs (image builds, clusters). Prints figures; asserts nothing.

    python bench/suite_cost.py JUNIT.xml [MORE.xml ...] [--durations LOG] [--top 20] [--kinds-from NEW.xml]

`make test PYTEST_ARGS="--junitxml=/tmp/suite.xml --durations=0"` writes one file per phase or stream
(/tmp/suite-parallel.xml, -docker, -long, -cluster, -bulk, -alone; tests/conftest.py): pass them all, or the base name,
which finds them.
A test's seconds are setup + call + teardown (pytest's junit default), so a session fixture's first use (an image
build, a Slurm cluster) is billed to the first test that asks for it; the durations log names those setups.
In the parallel phase the figures are per worker, and the docker, long, cluster and bulk streams run side by side: a
sum of figures is CPU-side cost, not wall time.
"""

from __future__ import annotations

import argparse
import re
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)s (setup|call|teardown)\s+(\S.*?)\s*$")
# The phase or stream a junit file's name ends with (tests/conftest.py names them); beside, timing and serial are the
# streams of older runs, whose files still read.
STREAMS = ("parallel", "docker", "long", "cluster", "bulk", "alone", "beside", "timing", "serial")


@dataclass(frozen=True)
class Case:
    """One test as junit recorded it."""

    file: str
    test: str
    seconds: float
    outcome: str
    kind: str
    phase: str

    @property
    def nodeid(self) -> str:
        return f"{self.file}::{self.test}"


def module_file(classname: str) -> tuple[str, str]:
    """Split junit's dotted classname (module[.Class]) into the test file's path and the class part."""
    parts = classname.split(".")
    for cut in range(len(parts), 0, -1):
        path = "/".join(parts[:cut]) + ".py"
        if (ROOT / path).is_file() or (cut < len(parts) and not parts[cut][:1].isupper()):
            return path, "::".join(parts[cut:])
    for cut in range(len(parts), 0, -1):  # a file that no longer exists: the last part named test_*
        if parts[cut - 1].startswith("test"):
            return "/".join(parts[:cut]) + ".py", "::".join(parts[cut:])
    return "/".join(parts) + ".py", ""


def outcome_of(case: ET.Element) -> str:
    for tag in ("failure", "error", "skipped"):
        if case.find(tag) is not None:
            return tag
    return "passed"


def read_junit(path: Path) -> tuple[list[Case], float]:
    """The cases of one junit file, and its suites' wall time."""
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError) as e:
        raise SystemExit(
            f"suite_cost: {path}: not a junit XML file pytest wrote ({e}); pass --junitxml's file"
        ) from None
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    wall = sum(float(s.get("time", 0)) for s in suites)
    phase = next(
        (p for p in STREAMS if path.stem.endswith(f"-{p}")),
        "one",
    )
    cases = []
    for suite in suites:
        for case in suite.iter("testcase"):
            props = {p.get("name"): p.get("value", "") for p in case.iter("property")}
            file, cls = module_file(case.get("classname", ""))
            test = "::".join(p for p in (cls, case.get("name", "")) if p)
            cases.append(
                Case(
                    file,
                    test,
                    float(case.get("time", 0) or 0),
                    outcome_of(case),
                    props.get("kind", "?"),
                    phase,
                )
            )
    return cases, wall


def junit_paths(args: list[str]) -> list[Path]:
    """The files named, with a base name that `make test` split into its phases expanded to them."""
    out: list[Path] = []
    for arg in args:
        path = Path(arg)
        phases = sorted(path.parent.glob(f"{path.stem}-*{path.suffix}"))
        out += [path] if path.is_file() else phases
        if not path.is_file() and not phases:
            raise SystemExit(f"suite_cost: {arg}: no such junit file (nor {path.stem}-<phase>{path.suffix})")
    return out


def read_durations(path: Path) -> dict[str, dict[str, float]]:
    """nodeid -> {setup, call, teardown} seconds from pytest's --durations=0 lines."""
    out: dict[str, dict[str, float]] = defaultdict(dict)
    for line in path.read_text(errors="replace").splitlines():
        m = DURATION.match(line)
        if m:
            out[m[3]][m[2]] = out[m[3]].get(m[2], 0.0) + float(m[1])
    return out


def table(title: str, head: tuple[str, ...], rows: list[tuple[object, ...]]) -> None:
    print(f"\n### {title}\n")
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---:" if i else "---" for i in range(len(head))) + "|")
    for row in rows:
        print("| " + " | ".join(f"{v:.1f}" if isinstance(v, float) else str(v) for v in row) + " |")


def grouped(cases: list[Case], key: str) -> list[tuple[str, int, float, float]]:
    """(group, tests, seconds, largest test) per group, costliest first."""
    acc: dict[str, list[float]] = defaultdict(list)
    for c in cases:
        name = c.file if key == "file" else str(Path(c.file).parent) if key == "dir" else c.kind
        acc[name].append(c.seconds)
    return sorted(((k, len(v), sum(v), max(v)) for k, v in acc.items()), key=lambda r: -r[2])


def main(argv: list[str] | None = None) -> int:
    """Read, group and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit", nargs="+", help="junit XML file(s) of one suite run")
    parser.add_argument("--durations", type=Path, help="the run's log with pytest --durations=0 lines")
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument(
        "--kinds-from", help="take each test's kind from this newer junit (for an older run's file)"
    )
    args = parser.parse_args(argv)
    cases: list[Case] = []
    walls: dict[str, float] = {}
    for path in junit_paths(args.junit):
        found, wall = read_junit(path)
        cases += found
        walls[path.name] = wall
    if args.kinds_from:
        kinds = {c.nodeid: c.kind for p in junit_paths([args.kinds_from]) for c in read_junit(p)[0]}
        cases = [Case(c.file, c.test, c.seconds, c.outcome, kinds.get(c.nodeid, "?"), c.phase) for c in cases]
    total = sum(c.seconds for c in cases)
    outcomes: dict[str, int] = defaultdict(int)
    for c in cases:
        outcomes[c.outcome] += 1
    print(
        f"{len(cases)} tests ({', '.join(f'{n} {k}' for k, n in sorted(outcomes.items()))}); "
        f"sum of test times {total:.0f} s ({total / 60:.1f} min)"
    )
    for name, wall in walls.items():
        print(f"  {name}: pytest's wall time {wall:.0f} s ({wall / 60:.1f} min)")

    def share(seconds: float) -> str:
        return f"{100 * seconds / total:.1f}%" if total else "-"

    table(
        "By kind (how `make test` schedules them)",
        ("kind", "tests", "seconds", "share", "largest test"),
        [(k, n, s, share(s), m) for k, n, s, m in grouped(cases, "kind")],
    )
    table(
        "By directory",
        ("directory", "tests", "seconds", "share", "largest test"),
        [(k, n, s, share(s), m) for k, n, s, m in grouped(cases, "dir")],
    )
    table(
        f"Top {args.top} files",
        ("file", "tests", "seconds", "share", "largest test"),
        [(f"`{k}`", n, s, share(s), m) for k, n, s, m in grouped(cases, "file")[: args.top]],
    )
    top = sorted(cases, key=lambda c: -c.seconds)[: args.top]
    table(
        f"Top {args.top} tests (setup + call + teardown)",
        ("test", "kind", "seconds"),
        [(f"`{c.nodeid}`", c.kind, c.seconds) for c in top],
    )
    if args.durations:
        phases = read_durations(args.durations)
        setups = sorted(((v.get("setup", 0.0), k) for k, v in phases.items()), reverse=True)[: args.top]
        table(
            f"Top {args.top} setups (a session fixture's first use: builds, clusters, stacks)",
            ("test", "setup s", "call s"),
            [(f"`{k}`", s, phases[k].get("call", 0.0)) for s, k in setups if s >= 0.5],
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
