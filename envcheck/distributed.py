"""`torchrun ... -m envcheck.distributed`: the dist.* checks across nodes (rank 0 reports).

Thin entry: parse arguments, run this rank (envcheck.checks.distributed.torchrun), render on rank 0,
exit non-zero on every node when any check failed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from envcheck.checks.distributed.torchrun import TorchrunOptions, missing_env, run_this_rank
from envcheck.core.result import SCHEMA_VERSION, Result, Status


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The entry point's options (a subset of `envcheck run`)."""
    parser = argparse.ArgumentParser(prog="torchrun ... -m envcheck.distributed", description=__doc__)
    parser.add_argument("--level", choices=("quick", "full"), default="quick",
                        help="full adds the dist.busbw sweep")
    parser.add_argument("--allow-cpu", action="store_true", help="use gloo on CPU even when GPUs exist")
    parser.add_argument("--timeout", type=float, default=120.0, help="process-group timeout per collective (s)")
    parser.add_argument("--min-busbw", type=float, default=None, metavar="GBPS")
    parser.add_argument("--strict-perf", action="store_true", help="a busbw below --min-busbw fails")
    parser.add_argument("--json", metavar="PATH", help="rank 0 writes the JSON report here ('-' = stdout)")
    parser.add_argument("--junit", metavar="PATH", help="rank 0 writes a JUnit XML report here")
    return parser.parse_args(argv)


def _json_report(results: list[Result], args: argparse.Namespace, code: int) -> str:
    from envcheck import __version__

    context = {"level": args.level, "allow_cpu": args.allow_cpu, "mode": "torchrun"}
    return json.dumps({"schema_version": SCHEMA_VERSION, "envcheck_version": __version__, "context": context,
                       "results": [r.to_dict() for r in results], "facts": {}, "exit_code": code}, indent=2)


def _junit_report(results: list[Result]) -> str:
    suite = ElementTree.Element("testsuite", name="envcheck.distributed", tests=str(len(results)),
                                failures=str(sum(r.status is Status.FAIL for r in results)),
                                errors=str(sum(r.status is Status.ERROR for r in results)),
                                skipped=str(sum(r.status is Status.SKIP for r in results)))
    for r in results:
        case = ElementTree.SubElement(suite, "testcase", classname="dist", name=r.name, time=f"{r.duration_s:.3f}")
        tag = {Status.FAIL: "failure", Status.ERROR: "error", Status.SKIP: "skipped"}.get(r.status)
        if tag:
            ElementTree.SubElement(case, tag, message=r.summary).text = r.details or r.remediation or ""
        elif r.details:
            ElementTree.SubElement(case, "system-out").text = r.details
    return ElementTree.tostring(suite, encoding="unicode")


def render(results: list[Result], args: argparse.Namespace, code: int, out: Any = sys.stdout) -> None:
    """Print one line per check (plus tables) and write --json/--junit. Swap in envcheck.report later."""
    for r in results:
        print(f"{r.status.value.upper():5} {r.name:18} {r.summary}", file=out)
        if r.status is not Status.PASS and r.remediation:
            print(f"      fix: {r.remediation}", file=out)
        if r.name == "dist.busbw" and r.details:
            print(r.details, file=out)
    if args.json:
        text = _json_report(results, args, code)
        print(text, file=out) if args.json == "-" else Path(args.json).write_text(text + "\n")
    if args.junit:
        Path(args.junit).write_text(_junit_report(results) + "\n")


def main(argv: list[str] | None = None) -> int:
    """Run this rank; rank 0 renders. Exit 0 only when every check passed or warned."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    missing = missing_env()
    if missing:
        print(f"envcheck.distributed: {', '.join(missing)} not set; start it with torchrun, e.g. "
              "`torchrun --nproc-per-node 2 -m envcheck.distributed`", file=sys.stderr)
        return 2
    opts = TorchrunOptions(full=args.level == "full", allow_cpu=args.allow_cpu, timeout_s=args.timeout,
                           min_busbw_gbps=args.min_busbw, strict_perf=args.strict_perf)
    code, results = run_this_rank(opts)
    if results is not None:
        render(results, args, code)
    return code


if __name__ == "__main__":
    sys.exit(main())
