"""`envcheck explain BUNDLE` and `envcheck facts --bundle FILE`: capture on one host, diagnose on any."""

from __future__ import annotations

import argparse
import json
import sys

from envcheck import __version__
from envcheck.core.errors import FatalError


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `explain` subcommand (its verdict flags are `run`'s)."""
    from envcheck.app.args import non_negative_int, output_path

    explain = sub.add_parser("explain", help="diagnose a bundle from `envcheck facts --bundle` (any machine)")
    explain.add_argument("bundle", metavar="BUNDLE", help="the bundle file")
    explain.add_argument("--allow-cpu", action="store_true",
                         help="no GPU is fine: cuda.available warns instead of failing")
    explain.add_argument("--expect-gpus", type=non_negative_int, metavar="N", help="fail unless N GPUs were visible")
    explain.add_argument("--json", type=output_path, metavar="PATH", help="write JSON ('-' = stdout only)")
    explain.add_argument("--junit", type=output_path, metavar="PATH", help="write JUnit XML")
    explain.set_defaults(handler=cmd_explain)


def cmd_explain(args: argparse.Namespace) -> int:
    """Replay the bundle's diagnosis and render it as `run` would; exit as `run` would have."""
    from envcheck.app.args import report_on_stdout
    from envcheck.app.output import Terminal, raise_failures, write_reports
    from envcheck.core.check import Context
    from envcheck.core.run_report import RunReport
    from envcheck.evidence.bundle import load_bundle
    from envcheck.evidence.replay import explain_bundle
    from envcheck.report.json_report import render_json
    from envcheck.report.junit import render_junit
    from envcheck.report.summary import exit_code
    from envcheck.report.table import print_report

    bundle = load_bundle(args.bundle)
    ctx = Context(allow_cpu=args.allow_cpu, expect_gpus=args.expect_gpus)
    results = explain_bundle(bundle, ctx)
    facts = bundle.get("facts") or {}
    report = RunReport(results=results, facts={**facts, "bundle": {
        "file": args.bundle, "envcheck_version": bundle.get("envcheck_version"), "env": bundle.get("env", {}),
        "libraries": bundle["cuda"].get("libraries", [])}}, context=ctx)
    console = Terminal(stderr=report_on_stdout(args), highlight=False, width=None if sys.stdout.isatty() else 140)
    print_report(report, console)
    raise_failures(write_reports([(args.json, lambda: render_json(report)),
                                  (args.junit, lambda: render_junit(report))]))
    return exit_code(results)


def cmd_bundle(args: argparse.Namespace) -> int:
    """`envcheck facts --bundle FILE`: capture the diagnosis inputs in an isolated worker, with the facts."""
    from envcheck.app.output import write_output
    from envcheck.checks import HOOKS
    from envcheck.core.check import Context
    from envcheck.core.result import Status
    from envcheck.core.runner import Runner
    from envcheck.evidence.bundle import CAPTURE_SPEC, make_bundle

    with Runner(Context(), total_timeout_s=args.timeout, hooks=HOOKS) as runner:
        (result,) = runner.run([CAPTURE_SPEC])
        facts = runner.facts() if result.status is Status.PASS else {}
    if result.status is not Status.PASS:
        raise FatalError(f"could not capture the bundle: {result.summary}", exit_code=3)
    bundle = make_bundle(dict(result.measured["bundle"]), facts, __version__)  # type: ignore[arg-type]
    write_output(args.bundle, json.dumps(bundle, indent=2, default=str) + "\n")
    if args.bundle != "-":
        print(f"wrote {args.bundle}: explain it anywhere with `envcheck explain {args.bundle}`", file=sys.stderr)
    return 0
