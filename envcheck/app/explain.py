"""`envcheck explain BUNDLE`: diagnose on any machine a bundle captured on another (`envcheck facts --bundle`)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from envcheck.app.requests import Handler, Request


@dataclass(frozen=True, kw_only=True)
class ExplainRequest(Request):
    """`envcheck explain BUNDLE`: the bundle, the verdict flags `run` shares, and the reports."""

    bundle: str
    allow_cpu: bool
    expect_gpus: int | None
    json: str | None
    junit: str | None

    def outputs(self) -> dict[str, str | None]:
        """--json and --junit, and the bundle they must not replace."""
        return {"--json": self.json, "--junit": self.junit, "BUNDLE": self.bundle}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `explain` subcommand (its verdict flags are `run`'s)."""
    from envcheck.app.args import non_negative_int, output_path

    explain = sub.add_parser("explain", help="diagnose a bundle from `envcheck facts --bundle` (any machine)")
    explain.add_argument("bundle", metavar="BUNDLE", help="the bundle file")
    explain.add_argument(
        "--allow-cpu", action="store_true", help="no GPU is fine: cuda.available warns instead of failing"
    )
    explain.add_argument(
        "--expect-gpus", type=non_negative_int, metavar="N", help="fail unless N GPUs were visible"
    )
    explain.add_argument("--json", type=output_path, metavar="PATH", help="write JSON ('-' = stdout only)")
    explain.add_argument("--junit", type=output_path, metavar="PATH", help="write JUnit XML")
    explain.set_defaults(handler=Handler(ExplainRequest, cmd_explain))


def cmd_explain(request: ExplainRequest) -> int:
    """Replay the bundle's diagnosis and render it as `run` would; exit as `run` would have."""
    from envcheck.app.output import raise_failures
    from envcheck.app.render import show_and_write, terminal
    from envcheck.core.check import Context
    from envcheck.core.run_report import RunReport
    from envcheck.evidence.bundle import load_bundle
    from envcheck.evidence.replay import explain_bundle
    from envcheck.report.summary import exit_code

    bundle = load_bundle(request.bundle)
    ctx = Context(allow_cpu=request.allow_cpu, expect_gpus=request.expect_gpus)
    results = explain_bundle(bundle, ctx)
    facts = bundle.get("facts") or {}
    report = RunReport(
        results=results,
        facts={
            **facts,
            "bundle": {
                "file": request.bundle,
                "envcheck_version": bundle.get("envcheck_version"),
                "env": bundle.get("env", {}),
                "libraries": bundle["cuda"].get("libraries", []),
            },
        },
        context=ctx,
    )
    raise_failures(show_and_write(report, request, terminal(request)))
    return exit_code(results)
