"""Every check's time at quick and full level, cold and warm, against the time budget (prints figures, asserts nothing).

    python bench/check_budget.py [--python PATH] [--levels quick,full] [--pairs 3] [--max-load 3] [--json OUT]

Cold: a fresh interpreter with empty Inductor and Triton caches (TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR and TMPDIR
are new empty folders, so Inductor's precompiled header is cold too). Warm: the same command again with the same
folders (what a user who keeps a compile cache gets on a second run; without one, envcheck compiles in its private
temp dir and every run is cold). Each run is `envcheck run --level L --allow-cpu --json` (no --allow-cpu on a GPU
host); its report gives every check's time.

Budgets (the project's targets): the full level at most FULL_BUDGET_S wall, cold, on the 2-core dev machine; the quick level at
most QUICK_RATIO times a bare `import torch` of the same interpreter, measured as the median of --pairs alternating
(bare import, quick run) pairs in the same session, so both see the same load. The per-check budgets (CHECK_BUDGET_S)
are each check's share of the full level's 60 s on this machine: a check over its share is named.

The machine is shared: every figure is printed with the 1-minute load average at its start; with --max-load, a run
waits (up to --max-wait seconds) until the load falls below it, and a run that started above it is repeated once.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FULL_BUDGET_S = 60.0  # the full level, cold, wall, 2 cores
QUICK_RATIO = 1.3  # the quick level against a bare `import torch`, wall, median of pairs
# Each check's share of the full level on this 2-core machine (cold, CPU only, seconds as its report gives them; lanes
# run side by side, so the wall is not their sum). A worker's one-time costs are budgeted on the check that pays them in
# registry order: compile.inductor pays the compile worker's Dynamo import, its one ISA probe and the precompiled header
# the other compile checks reuse; amp.clip_after_unscale the numerics worker's first optimizer (Dynamo's import);
# vision.import the torchvision import it proves. Checks not listed: 1 s.
CHECK_BUDGET_S = {
    "compile.inductor": 30.0,
    "compile.train_step": 22.0,
    "compile.max_autotune": 5.0,
    "compile.cpu_isa": 1.0,
    "vision.import": 10.0,
    "ops.opdb": 8.0,
    "ddp.differential": 12.0,
    "train.state_roundtrip": 6.0,
    "attention.reference": 3.0,
    "modules.train_eval": 3.0,
    "losses.reference": 2.0,  # every combination of the interacting options (387 cases at full level)
    "autograd.gradcheck": 4.0,
    "amp.clip_after_unscale": 5.0,
    "optim.differential": 2.0,
    "dist.all_reduce": 2.0,
    "dist.collectives": 2.0,
    "dist.busbw": 3.0,
    "perf.relative": 3.0,
}
DEFAULT_CHECK_BUDGET_S = 1.0


@dataclass
class Run:
    """One timed command: wall and CPU seconds, the load average at its start, each check's time and status."""

    label: str
    wall: float
    cpu: float
    load: float
    rc: int
    checks: dict[str, tuple[float, str]] = field(default_factory=dict)


def has_gpu() -> bool:
    """An /dev/nvidiaN node (as envcheck's runner decides it)."""
    try:
        return any(n.startswith("nvidia") and n[6:].isdigit() for n in os.listdir("/dev"))
    except OSError:
        return False


def wait_for_load(max_load: float | None, max_wait: float) -> float:
    """The 1-minute load average, after waiting up to `max_wait` s for it to fall below `max_load`."""
    began = time.monotonic()
    while max_load is not None and os.getloadavg()[0] >= max_load and time.monotonic() - began < max_wait:
        time.sleep(5)
    return os.getloadavg()[0]


def timed(label: str, argv: list[str], env: dict[str, str], report: Path | None) -> Run:
    """Run argv once; wall, CPU (the process and its reaped descendants), and the checks' times from `report`."""
    load = os.getloadavg()[0]
    if report is not None:
        report.unlink(missing_ok=True)
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    run = Run(label, time.perf_counter() - start, usage.ru_utime + usage.ru_stime, load, proc.returncode)
    print(f"  {label}: {run.wall:.2f} s wall, {run.cpu:.2f} s CPU, load {load:.2f} at start", flush=True)
    if report is not None and report.exists():
        for r in json.loads(report.read_text())["results"]:
            run.checks[r["name"]] = (float(r["duration_s"]), str(r["status"]))
    return run


class Session:
    """The runs of one benchmark: one interpreter, one environment, fresh cache folders per cold run."""

    def __init__(self, python: str, max_load: float | None, max_wait: float) -> None:
        self.python = python
        self.max_load, self.max_wait = max_load, max_wait
        self.env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        for key in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "TORCHINDUCTOR_COMPILE_THREADS"):
            self.env.pop(key, None)
        self.cpu_flag = [] if has_gpu() else ["--allow-cpu"]

    def compile_tree(self) -> bool:
        """Compile this tree's envcheck to bytecode with the measured interpreter, as pip compiles an installed
        wheel; whether that worked. Where PYTHONDONTWRITEBYTECODE is set no run writes a .pyc, so every run would
        compile envcheck's modules from source again (about 0.5 s of a quick run, in the fork server before it forks),
        which no user of the wheel or the images pays."""
        done = subprocess.run(
            [self.python, "-m", "compileall", "-q", str(ROOT / "envcheck")],
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
        )
        return done.returncode == 0

    def bare(self) -> Run:
        """A bare `import torch` in a fresh interpreter."""
        return timed("bare import torch", [self.python, "-c", "import torch"], self.env, None)

    def envcheck(self, level: str, label: str, caches: Path) -> Run:
        """`envcheck run --level LEVEL` with its caches (and TMPDIR) in `caches`."""
        env = {
            **self.env,
            "TMPDIR": str(caches / "tmp"),
            "TORCHINDUCTOR_CACHE_DIR": str(caches / "inductor"),
            "TRITON_CACHE_DIR": str(caches / "triton"),
        }
        (caches / "tmp").mkdir(parents=True, exist_ok=True)
        report = caches / "report.json"
        argv = [self.python, "-m", "envcheck", "run", "--level", level, *self.cpu_flag, "--json", str(report)]
        return timed(label, argv, env, report)

    def cold_warm(self, level: str) -> tuple[Run, Run]:
        """A cold run in fresh folders, then a warm run in the same ones; a run that started above --max-load is
        repeated once (the cold one in fresh folders again)."""
        runs = []
        for _ in range(2 if self.max_load is not None else 1):
            with tempfile.TemporaryDirectory(prefix="envcheck-budget-") as tmp:
                wait_for_load(self.max_load, self.max_wait)
                cold = self.envcheck(level, f"{level} cold", Path(tmp))
                wait_for_load(self.max_load, self.max_wait)
                warm = self.envcheck(level, f"{level} warm", Path(tmp))
                shutil.rmtree(tmp, ignore_errors=True)
            runs.append((cold, warm))
            if self.max_load is None or max(cold.load, warm.load) < self.max_load:
                break
        return min(runs, key=lambda pair: max(pair[0].load, pair[1].load))


def lanes(names: list[str]) -> dict[str, list[str]]:
    """The checks of each isolation group (one worker: its checks run one after another), from the registry."""
    sys.path.insert(0, str(ROOT))
    from envcheck.checks.check_registry import registry  # torch-free at import

    groups: dict[str, list[str]] = {}
    for name in names:
        spec = registry().get(name)
        if spec is not None and spec.isolated:
            groups.setdefault(spec.group, []).append(name)
    return groups


def print_table(runs: list[Run]) -> None:
    """Every check's time in each run, with its budget."""
    names = list(dict.fromkeys(n for r in runs for n in r.checks))
    head = "".join(f"{r.label:>16s}" for r in runs)
    print(f"\n{'check':28s}{head}{'budget':>9s}")
    for name in names:
        cells = ""
        for r in runs:
            seconds, status = r.checks.get(name, (None, "-"))
            cells += f"{'-':>16s}" if seconds is None else f"{seconds:10.2f} {status[:4]:>5s}"
        budget = CHECK_BUDGET_S.get(name, DEFAULT_CHECK_BUDGET_S)
        full_cold = next((r for r in runs if r.label == "full cold"), None)
        over = full_cold is not None and full_cold.checks.get(name, (0.0, ""))[0] > budget
        print(f"{name:28s}{cells}{budget:8.1f}s{'  OVER' if over else ''}")
    print(
        f"{'sum of check times':28s}" + "".join(f"{sum(t for t, _ in r.checks.values()):16.2f}" for r in runs)
    )
    for group, members in lanes(
        names
    ).items():  # a worker's checks run one after another: its sum is a lower bound
        sums = "".join(f"{sum(r.checks.get(n, (0.0, ''))[0] for n in members):16.2f}" for r in runs)
        budget = sum(CHECK_BUDGET_S.get(n, DEFAULT_CHECK_BUDGET_S) for n in members)
        print(f"{'  worker ' + group:28s}{sums}{budget:8.1f}s")
    print(f"{'wall (whole run)':28s}" + "".join(f"{r.wall:16.2f}" for r in runs))
    print(f"{'CPU (process tree)':28s}" + "".join(f"{r.cpu:16.2f}" for r in runs))
    print(f"{'load average at start':28s}" + "".join(f"{r.load:16.2f}" for r in runs))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--python", default=sys.executable, help="the interpreter to measure (a CUDA-wheel venv)"
    )
    parser.add_argument("--levels", default="quick,full")
    parser.add_argument("--pairs", type=int, default=3, help="alternating (bare import, quick run) pairs")
    parser.add_argument(
        "--max-load", type=float, default=None, help="wait for the load average to fall below"
    )
    parser.add_argument("--max-wait", type=float, default=300.0)
    parser.add_argument("--json", type=Path, default=None, help="also write every run as JSON")
    args = parser.parse_args()
    session = Session(args.python, args.max_load, args.max_wait)
    compiled = session.compile_tree()
    version = subprocess.run(
        [args.python, "-c", "import torch; print(torch.__version__)"],
        env=session.env,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    print(
        f"python {args.python}; torch {version or 'absent'}; {os.cpu_count()} cores; "
        f"{'GPU host' if has_gpu() else 'no GPU (--allow-cpu)'}; load {os.getloadavg()[0]:.2f}; "
        f"envcheck's bytecode {'compiled' if compiled else 'NOT compiled (runs compile it from source)'}"
    )
    levels = [level for level in args.levels.split(",") if level]
    runs: list[Run] = []
    pairs: list[tuple[Run, Run]] = []
    if "quick" in levels:
        session.bare()  # the page cache, for both
        for _ in range(args.pairs):
            with tempfile.TemporaryDirectory(prefix="envcheck-budget-") as tmp:
                wait_for_load(args.max_load, args.max_wait)
                pairs.append((session.bare(), session.envcheck("quick", "quick", Path(tmp))))
        runs += session.cold_warm("quick")
    if "full" in levels:
        runs += session.cold_warm("full")
    print_table(runs)
    if pairs:
        ratios = [q.wall / b.wall for b, q in pairs]
        print(
            f"\nquick vs bare import torch ({len(pairs)} alternating pairs): bare median "
            f"{statistics.median(b.wall for b, _ in pairs):.2f} s, quick median "
            f"{statistics.median(q.wall for _, q in pairs):.2f} s, ratio median {statistics.median(ratios):.2f}x "
            f"(pairs: {', '.join(f'{r:.2f}x@load {q.load:.1f}' for r, (_, q) in zip(ratios, pairs, strict=True))}); "
            f"budget <= {QUICK_RATIO}x: {'met' if statistics.median(ratios) <= QUICK_RATIO else 'MISSED'}"
        )
        best = min(q.wall for _, q in pairs) / min(b.wall for b, _ in pairs)
        cpu = statistics.median(q.cpu / b.cpu for b, q in pairs)
        print(
            f"  best quick / best bare: {best:.2f}x (the least disturbed of each; other work on a shared machine "
            f"slows single runs, never the best); CPU ratio median {cpu:.2f}x"
        )
    for run in runs:
        if run.label.startswith("full"):
            verdict = "met" if run.wall <= FULL_BUDGET_S else "MISSED"
            budget = f"; budget <= {FULL_BUDGET_S:g} s: {verdict}" if run.label == "full cold" else ""
            print(f"{run.label}: {run.wall:.1f} s wall (load {run.load:.2f}, rc {run.rc}){budget}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "python": args.python,
                    "torch": version,
                    "cores": os.cpu_count(),
                    "runs": [r.__dict__ for r in runs],
                    "pairs": [[b.__dict__, q.__dict__] for b, q in pairs],
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
