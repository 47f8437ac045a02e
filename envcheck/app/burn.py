"""`envcheck burn`: repeated, deterministic workloads on every GPU of the node (or, asked for, every CPU core) until a
time budget ends; wrong bits, inaccuracy and stragglers as results (envcheck.burn), through the same reports as a
run, with a progress line and, asked for, a PNG of throughput and clocks over time.

Exit codes: 0 nothing found (warnings included), 1 a fault (preflight: a node fault exits 10; an image fault is a
warning there), 2 bad input, 3 the burn itself failed before it could judge (a worker died, none started: never the
node's fault), 130 Ctrl-C and 128+N a signal (the report of what finished is still shown and written).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from envcheck.app.args import duration, names, output_dir, output_path, percent, worker_count
from envcheck.app.requests import Handler, Request
from envcheck.core.errors import UsageError

if TYPE_CHECKING:
    from envcheck.app.terminal import Terminal

STARTUP_MAX_S = 60.0  # longer is no command's start-up: count from the call


@dataclass(frozen=True, kw_only=True)
class BurnRequest(Request):
    """`envcheck burn`'s arguments."""

    budget: float
    allow_cpu: bool
    cpu_workers: int | None
    only: str | None
    json: str | None
    junit: str | None
    plots: str | None
    baseline: str | None
    margin: float
    far: float
    for_mode: str | None

    def outputs(self) -> dict[str, str | None]:
        """--json and --junit."""
        return {"--json": self.json, "--junit": self.junit}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `burn` subcommand."""
    p = sub.add_parser(
        "burn",
        help="burn every GPU for a time budget: wrong bits, inaccuracy and stragglers",
        description="Run deterministic matmuls (every dtype the GPU supports), attention, a convolution, reductions "
        "and an all-reduce on every GPU until the budget ends; compare the GPUs bit for bit and with float64 "
        "references, and their throughput with each other and the fleet (docs/cluster.md: Burn-in).",
    )
    p.add_argument(
        "--budget",
        type=duration,
        default=600.0,
        metavar="DURATION",
        help="how long: 90s, 15m, 4h (default 10m)",
    )
    p.add_argument(
        "--allow-cpu", action="store_true", help="on a host without a GPU, burn the CPU cores instead"
    )
    p.add_argument(
        "--cpu-workers",
        type=worker_count,
        metavar="N",
        help="CPU workers with --allow-cpu (default: one per core)",
    )
    p.add_argument(
        "--only", type=names, metavar="NAMES", help="workloads or families (matmul, sdpa.bfloat16, ...)"
    )
    p.add_argument("--json", type=output_path, metavar="PATH|-", help="write the JSON report (- for stdout)")
    p.add_argument("--junit", type=output_path, metavar="PATH|-", help="write JUnit XML")
    p.add_argument(
        "--plots", type=output_dir, metavar="DIR", help="write burn.png: throughput and clocks over time"
    )
    p.add_argument(
        "--baseline",
        metavar="FILE|PROFILE",
        help="judge throughput against the fleet's baseline (envcheck fleet --write-baseline)",
    )
    p.add_argument(
        "--margin",
        type=percent,
        default=10.0,
        metavar="PCT",
        help="a device more than PCT%% below the node's best is a straggler (default %(default)g)",
    )
    p.add_argument(
        "--far",
        type=percent,
        default=20.0,
        metavar="PCT",
        help="more than PCT%% below the fleet baseline's median is a node fault, not a warning (default %(default)g)",
    )
    p.add_argument(
        "--for",
        dest="for_mode",
        choices=["preflight"],
        help="preflight: a Kubernetes Job's gate (a node fault exits 10, the verdict line on stdout)",
    )
    p.set_defaults(handler=Handler(BurnRequest, burn_main))


def _startup() -> float:
    """Seconds the `envcheck` command spent before the burn began: the budget counts from the command's start. A
    burn called inside another program (a library call, a test) counts from the call."""
    from envcheck.probe.system import process_age_s

    argv0 = Path(sys.argv[0])
    command = argv0.name == "envcheck" or (argv0.name == "__main__.py" and argv0.parent.name == "envcheck")
    age = process_age_s() if command else None
    return age if age is not None and age <= STARTUP_MAX_S else 0.0


def _check(request: BurnRequest) -> None:
    from envcheck.burn import catalogue

    chosen = [n.strip() for n in (request.only or "").split(",") if n.strip()]
    if unknown := catalogue.unknown(chosen):
        raise UsageError(
            f"--only {','.join(unknown)}: no such workload; choose from {', '.join(catalogue.names())} "
            "or a family (matmul, sdpa, conv, reduce, all_reduce)"
        )
    if request.cpu_workers is not None and not request.allow_cpu:
        raise UsageError("--cpu-workers applies to a CPU burn: add --allow-cpu")
    if request.plots:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise UsageError("--plots needs matplotlib: pip install 'envcheck[bench]'") from None


def burn_main(request: BurnRequest) -> int:
    """Handler: plan, burn, judge, report; the exit code (module docstring)."""
    began = time.monotonic() - _startup()
    _check(request)
    from envcheck.app.burn_gate import exit_code, fleet_lines, load_baseline
    from envcheck.app.burn_progress import progress_printer
    from envcheck.app.output import raise_failures
    from envcheck.app.render import show_and_write, terminal
    from envcheck.burn.coordinator import Coordinator
    from envcheck.burn.measures import facts, timeline
    from envcheck.burn.outcome import results
    from envcheck.burn.plan import NoDevice, make_plan
    from envcheck.core.run_report import RunReport

    only = tuple(n.strip() for n in (request.only or "").split(",") if n.strip())
    try:
        plan = make_plan(
            request.budget,
            allow_cpu=request.allow_cpu,
            cpu_workers=request.cpu_workers,
            only=only,
            began=began,
        )
    except NoDevice as exc:
        raise UsageError(str(exc)) from None
    name, stored = load_baseline(request.baseline)
    console = terminal(request, to_stderr=request.for_mode is not None)  # a gate's stdout: its verdict line
    run = Coordinator(plan, progress_printer(plan, sys.stderr)).run()
    fleet = fleet_lines(stored, name, run)
    found = results(run, margin_pct=request.margin, fleet=fleet, baseline=name, far_pct=request.far)
    skipped = {k: v for w in run.tally.workers.values() for k, v in w.skipped.items()}
    report = RunReport(results=found, facts=facts(run, skipped))
    failures = show_and_write(report, request, console)
    if request.plots:
        failures += _plot(timeline(run), request.plots, console)
    raise_failures(failures)
    return exit_code(found, run, request.for_mode, request.report_on_stdout)


def _plot(data: dict[str, object], folder: str, console: Terminal) -> list[str]:
    from envcheck.perf.plots import write_timeline

    try:
        path = write_timeline(data, folder)
    except OSError as exc:
        return [f"cannot write the plot into {folder}: {exc.strerror or exc}"]
    console.print(
        f"plot written: {path}" if path else "no plot: nothing was measured over time", markup=False
    )
    return []
