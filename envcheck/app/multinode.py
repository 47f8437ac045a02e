"""`torchrun ... -m envcheck.distributed` (or `srun ... python -m envcheck.distributed`): the dist.* checks
across nodes (rank 0 reports). Under srun, SLURM_PROCID/NTASKS/LOCALID and the job's first node stand in
for torchrun's variables (envcheck.probe.slurm_env).

Thin entry: parse arguments, run this rank (envcheck.collectives.torchrun), render on rank 0,
exit non-zero on every node when any check failed. Rank 0 writes the report on every path: success,
failure, a dead rank, a stalled rank (findings travel over torchrun's TCPStore, not the backend).
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass

from envcheck.app.args import Parser, output_path
from envcheck.app.guard import guard
from envcheck.app.output import raise_failures, write_reports
from envcheck.app.render import report_files
from envcheck.app.requests import Handler
from envcheck.app.run_args import SharedRunFlags, add_shared_run_arguments
from envcheck.app.terminal import Terminal
from envcheck.collectives.torchrun import TABLE_CHECKS, TorchrunOptions, missing_env, run_this_rank
from envcheck.core.check import CheckOptions, Context, DistOptions, Level
from envcheck.core.errors import UsageError
from envcheck.core.result import Result
from envcheck.core.run_report import RunReport
from envcheck.core.text import visible
from envcheck.probe.facts import collect_facts
from envcheck.probe.slurm_env import torchrun_env
from envcheck.report.table import print_report


@dataclass(frozen=True, kw_only=True)
class DistributedRequest(SharedRunFlags):
    """The torchrun entry's arguments: `envcheck run`'s shared run flags, and --pairwise."""

    timeout: float  # how long a rank may make no progress (default 120 s), never None here
    pairwise: bool


def parse_args(argv: list[str]) -> DistributedRequest:
    """The entry point's options (a subset of `envcheck run`, validated by the same argument types; a bad
    value is one line and exit 2). `--timeout` here is how long a rank may make no progress."""
    parsed = build_parser().parse_args(argv)
    handler: Handler[DistributedRequest] = parsed.handler
    return handler.typed(parsed)


def build_parser() -> Parser:
    """The entry point's parser; its handler runs this rank."""
    parser = Parser(prog="torchrun ... -m envcheck.distributed", description=__doc__)
    # The shared run flags; --timeout means a rank's allowed silence here, and only rank 0 writes --json/--junit,
    # so only rank 0 judges those paths (in run_rank: another node need not have the folder).
    add_shared_run_arguments(
        parser,
        timeout_default=120.0,
        check_outputs=False,
        timeout_help="a rank making no progress this long (s) is reported as stalled; "
        "also the process-group timeout (not a cap on the whole run)",
    )
    parser.add_argument(
        "--pairwise",
        action="store_true",
        help="also measure all-reduce busbw between every pair of nodes (dist.pairs; --level full "
        "runs it anyway) and name a slow node against --min-busbw, or else against the others",
    )
    parser.set_defaults(handler=Handler(DistributedRequest, run_rank))
    return parser


def render(results: list[Result], request: DistributedRequest) -> None:
    """Print the table (and the busbw sweep), write --json/--junit with the shared report renderers."""
    context = Context(
        level=Level(request.level),
        allow_cpu=request.allow_cpu,
        options=CheckOptions(
            front_door="torchrun",
            dist=DistOptions(
                min_busbw_gbps=request.min_busbw,
                min_busbw_at_bytes=request.min_busbw_at,
                strict_perf=request.strict_perf,
            ),
        ),
    )
    report = RunReport(results=results, facts=collect_facts(), context=context)
    out = sys.stderr if request.json == "-" else sys.stdout  # keep stdout pure JSON with --json -
    # Files first: they are the record, whatever happens to the terminal (each written on its own).
    files = [
        (path, render)
        for path, render in report_files(report, request, "envcheck.distributed")
        if path != "-"
    ]
    failures = write_reports(files)
    # markup=False: summaries quote backend errors such as gloo's '[/path/pair.cc:537]', which rich
    # would otherwise parse as a closing tag and raise on.
    print_report(report, Terminal(file=out, highlight=False, markup=False))
    for r in results:
        if r.name in TABLE_CHECKS and r.details:
            print(visible(r.details), file=out)
    failures += write_reports(
        [
            (path, render)
            for path, render in report_files(report, request, "envcheck.distributed")
            if path == "-"
        ]
    )
    raise_failures(failures)


def main(argv: list[str] | None = None) -> int:
    """Run this rank; rank 0 renders. Exit 0 only when every check passed or warned; 2 on bad input."""
    return guard(
        lambda: run_rank(parse_args(sys.argv[1:] if argv is None else argv)),
        prog="envcheck.distributed",
        signals=False,
    )


def run_rank(request: DistributedRequest) -> int:
    """This rank's part of the run (rank 0 judges and renders); the agreed exit code."""
    try:
        os.environ.update(
            torchrun_env(os.environ)
        )  # under srun: Slurm's task variables stand in for torchrun's
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    missing = missing_env()
    if missing:
        raise UsageError(
            f"{', '.join(missing)} not set; start it with torchrun, e.g. "
            "`torchrun --nproc-per-node 2 -m envcheck.distributed`, or with srun "
            "(`srun -N 2 --ntasks-per-node 8 python -m envcheck.distributed`)"
        )
    if os.environ.get("RANK") == "0":  # the writer judges the report paths before any collective runs
        for flag, path in request.outputs().items():
            if path:
                try:
                    output_path(path)
                except argparse.ArgumentTypeError as exc:
                    raise UsageError(f"argument {flag}: {exc}") from None
    opts = TorchrunOptions(
        full=request.level == "full",
        allow_cpu=request.allow_cpu,
        timeout_s=request.timeout,
        min_busbw_gbps=request.min_busbw,
        min_busbw_at_bytes=request.min_busbw_at,
        strict_perf=request.strict_perf,
        pairwise=request.pairwise,
    )
    code, clean = run_this_rank(opts, lambda results: render(results, request))
    if not clean:  # a rank died or stalled: a thread may be stuck in a collective, so skip teardown
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code
