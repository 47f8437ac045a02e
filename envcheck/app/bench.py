"""`envcheck bench`: measure performance (separate from the pass/fail run) and report figures."""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass
from typing import Any

from envcheck.app.args import (
    input_file,
    names,
    non_negative_float,
    output_dir,
    output_path,
    percent,
    positive_float,
    rank_count,
    thread_count,
)
from envcheck.app.output import WriteError, write_output
from envcheck.app.requests import Handler, Request
from envcheck.core.check import (
    BenchOptions,
    CheckOptions,
    CheckSpec,
    Context,
    DistOptions,
    Level,
    PerfOptions,
)
from envcheck.core.errors import ExitCode, FatalError, UsageError
from envcheck.core.result import Result, Status


@dataclass(frozen=True, kw_only=True)
class BenchRequest(Request):
    """`envcheck bench`'s arguments."""

    quick: bool
    json: str | None
    plots: str | None
    baseline: str | None
    threshold: float
    timeout: float | None
    allow_cpu: bool
    cpu_threads: int | None
    only: str | None
    cpu_ranks: int
    perf_margin: float

    def outputs(self) -> dict[str, str | None]:
        """--json."""
        return {"--json": self.json}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `bench` subcommand."""
    p = sub.add_parser(
        "bench",
        help="measure GPU (or CPU) performance against peaks and published figures",
        description="Measure matmul, memory, copy, all-reduce and training-step performance.",
    )
    p.add_argument("--quick", action="store_true", help="fewer sizes and repetitions (CPU: about a minute)")
    p.add_argument(
        "--json",
        type=output_path,
        metavar="PATH|-",
        help="write the JSON report to PATH, or to stdout with -",
    )
    p.add_argument("--plots", type=output_dir, metavar="DIR", help="write PNG plots of the sweeps into DIR")
    p.add_argument(
        "--baseline",
        metavar="FILE",
        type=input_file,
        help="compare with an earlier --json report; exit 1 on regression",
    )
    p.add_argument(
        "--threshold",
        metavar="PCT",
        type=non_negative_float,
        default=10.0,
        help="regression threshold in percent (default 10)",
    )
    p.add_argument(
        "--timeout", metavar="S", type=positive_float, default=None, help="cap on the whole bench, in seconds"
    )
    p.add_argument(
        "--allow-cpu", action="store_true", help="on a host without a GPU, measure the CPU variants"
    )
    p.add_argument(
        "--cpu-threads",
        metavar="N",
        type=thread_count,
        default=None,
        help="torch threads for the CPU variants (default: torch's choice)",
    )
    p.add_argument(
        "--only", metavar="NAMES", type=names, help="comma-separated bench units to run (see bench.* names)"
    )
    p.add_argument(
        "--cpu-ranks", metavar="N", type=rank_count, default=2, help="processes in the gloo all-reduce"
    )
    p.add_argument(
        "--perf-margin",
        metavar="PCT",
        type=percent,
        default=10.0,
        help="bench.relative: name a GPU or pair more than PCT%% below the node's best (default %(default)g)",
    )
    p.set_defaults(handler=Handler(BenchRequest, bench_main))


def _validate(request: BenchRequest) -> None:
    if request.threshold < 0:
        raise UsageError(
            f"--threshold {request.threshold:g}: must be >= 0 (a percentage, e.g. --threshold 10)"
        )
    if request.timeout is not None and request.timeout <= 0:
        raise UsageError(f"--timeout {request.timeout:g}: must be a positive number of seconds")
    if request.cpu_threads is not None and request.cpu_threads < 1:
        raise UsageError(f"--cpu-threads {request.cpu_threads}: must be at least 1")
    if request.cpu_ranks < 2:
        raise UsageError(f"--cpu-ranks {request.cpu_ranks}: an all-reduce needs at least 2 ranks")
    if request.plots:  # before any work, not after the whole bench ran
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise UsageError("--plots needs matplotlib: pip install 'envcheck[bench]'") from None


def units_to_run(cuda: bool, only: str | None) -> tuple[CheckSpec, ...]:
    """The units a bench runs: those named by --only, else the ones that run here (the GPU units on a GPU, the CPU
    variants without one: a CPU run neither announces nor lists GPU units it could only skip)."""
    from envcheck.core.selection import parse_names, select
    from envcheck.perf.units import CPU_UNITS, GPU_UNITS, bench_registry

    if only:
        return tuple(select(bench_registry(), Level.FULL, parse_names(only)))
    return GPU_UNITS if cuda else CPU_UNITS


def run_bench(request: BenchRequest, progress: Any = None) -> dict[str, Any]:
    """Run the probe, then the GPU units (or the CPU variants), and return the bench document."""
    from envcheck.checks.hooks import HOOKS
    from envcheck.core.runner import Runner
    from envcheck.perf.baseline import load_baseline, regressions
    from envcheck.perf.report import build_document
    from envcheck.perf.units import PROBE

    _validate(request)
    baseline = load_baseline(request.baseline) if request.baseline else None
    # The workers' GPU idle check counts this process and its descendants as envcheck's own.
    options = CheckOptions(
        bench=BenchOptions(cpu_threads=request.cpu_threads, envcheck_pid=os.getpid()),
        dist=DistOptions(cpu_ranks=request.cpu_ranks),
        perf=PerfOptions(margin_pct=request.perf_margin),
    )
    ctx = Context(
        level=Level.QUICK if request.quick else Level.FULL, allow_cpu=request.allow_cpu, options=options
    )
    with Runner(ctx, total_timeout_s=request.timeout, hooks=HOOKS) as runner:
        probe = runner.run_one(PROBE)
        if probe.status is not Status.PASS:
            raise FatalError(f"bench could not start: {probe.reason or probe.summary}", ExitCode.FAILED)
        device = dict(probe.measured)
        if not device.get("cuda") and not request.allow_cpu:
            raise UsageError(
                "no CUDA device is visible; pass --allow-cpu to measure the CPU variants instead"
            )
        units = units_to_run(bool(device.get("cuda")), request.only)
        results: list[Result] = []
        for spec in units:
            if progress is not None:
                progress(f"running {spec.name} ...")
            results.append(runner.run_one(spec))
    doc = build_document(device, results, request.quick)
    if baseline is not None:
        doc["regressions"] = regressions(doc["figures"], baseline["figures"], request.threshold)
    bad = doc["regressions"] or any(r.status is Status.ERROR for r in results)
    doc["exit_code"] = ExitCode.FAILED if bad else ExitCode.OK
    return doc


def bench_main(request: BenchRequest) -> int:
    """Handler for `envcheck bench`; returns the exit code (usage errors print one line, exit 2)."""
    from rich.console import Console

    from envcheck.perf.plots import write_plots
    from envcheck.perf.report import render_notes, render_table

    to_stdout = request.json == "-"
    console = Console(stderr=to_stdout, width=None if sys.stdout.isatty() else 150)
    err = Console(stderr=True)
    try:
        doc = run_bench(request, progress=lambda msg: err.print(f"[dim]{msg}[/dim]"))
        try:
            plots = write_plots(doc["figures"], request.plots) if request.plots else []
        except OSError as exc:
            raise WriteError(f"cannot write the plots into {request.plots}: {exc.strerror or exc}") from None
    except FatalError as exc:
        print(f"envcheck bench: {exc.message}", file=sys.stderr)
        return exc.exit_code
    console.print(render_table(doc))
    for line in render_notes(doc):
        console.print(line, markup=False)
    for path in plots:
        console.print(f"plot written: {path}", markup=False)
    if request.json:
        try:
            write_output(request.json, json.dumps(doc, indent=2) + "\n")
        except FatalError as exc:
            print(f"envcheck bench: {exc.message}", file=sys.stderr)
            return exc.exit_code
    return int(doc["exit_code"])
