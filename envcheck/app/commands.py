"""`envcheck run`, `list` and `facts`: their parsers, their requests and what they do.

What a run does is envcheck.app.run_command, imported when a run starts: building the parser (every command, and
`--version`) imports neither the engine nor the checks nor the cluster policies."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass

from envcheck import __version__
from envcheck.app.args import output_path, positive_float
from envcheck.app.requests import Handler, Request
from envcheck.app.run_args import RunRequest, add_cluster_arguments, add_run_arguments
from envcheck.core.errors import ExitCode, FatalError


@dataclass(frozen=True, kw_only=True)
class FactsRequest(Request):
    """`envcheck facts`: where to write them, the worker's timeout, and a bundle for `envcheck explain`."""

    json: str | None
    timeout: float
    bundle: str | None

    def outputs(self) -> dict[str, str | None]:
        """--json and --bundle."""
        return {"--json": self.json, "--bundle": self.bundle}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `run`, `list` and `facts`."""
    run = sub.add_parser("run", help="run the checks (the default)")
    add_run_arguments(run)
    add_cluster_arguments(run)
    run.set_defaults(handler=Handler(RunRequest, cmd_run))
    listing = sub.add_parser("list", help="list every check with its level and needs")
    listing.set_defaults(handler=Handler(Request, cmd_list))
    facts = sub.add_parser("facts", help="print the environment facts")
    facts.add_argument("--json", type=output_path, metavar="PATH", help="write JSON ('-' = stdout only)")
    facts.add_argument("--timeout", type=positive_float, default=60.0, metavar="SECONDS")
    facts.add_argument(
        "--bundle", type=output_path, metavar="FILE", help="write a bundle for `envcheck explain`"
    )
    facts.set_defaults(handler=Handler(FactsRequest, cmd_facts))


def cmd_run(request: RunRequest) -> int:
    """Run the selected checks and render every requested report, inside the mode `--for` names (under --for,
    envcheck's own failures never drain the node: Mode.guard)."""
    from envcheck.app.run_command import run

    return run(request)


def cmd_list(request: Request) -> int:
    """Print every check with its level, needs and timeout."""
    from rich.table import Table
    from rich.text import Text

    from envcheck.app.output import raise_failures, write_reports
    from envcheck.app.terminal import Terminal
    from envcheck.checks.check_registry import registry
    from envcheck.core.text import visible

    table = Table(title="envcheck checks")
    for col in ("check", "level", "needs", "timeout", "what it proves"):
        table.add_column(col)
    for spec in registry().values():
        table.add_row(
            *(
                Text(visible(cell))
                for cell in (
                    spec.name,
                    spec.level.value,
                    spec.needs.describe(),
                    f"{spec.timeout_s:g}s",
                    spec.description,
                )
            )
        )
    console = Terminal(highlight=False, width=160)
    console.print(table)
    raise_failures(write_reports([]))
    return ExitCode.OK


def cmd_facts(request: FactsRequest) -> int:
    """Collect and print (or write) the environment facts."""
    if request.bundle:  # `facts --bundle FILE`: envcheck.explain captures
        return cmd_bundle(request.bundle, request.timeout)
    from envcheck.app.output import raise_failures, write_reports
    from envcheck.app.terminal import Terminal
    from envcheck.checks.hooks import HOOKS
    from envcheck.core.check import Context
    from envcheck.core.redact import redact_deep
    from envcheck.core.runner import Runner
    from envcheck.report.table import print_facts

    with Runner(Context(), total_timeout_s=request.timeout, hooks=HOOKS) as runner:
        facts = runner.facts()
    if request.json != "-":
        print_facts(facts, Terminal(highlight=False))
    raise_failures(
        write_reports([(request.json, lambda: json.dumps(redact_deep(facts), indent=2, default=str) + "\n")])
    )
    if set(facts) == {"error"}:  # the worker crashed or timed out: nothing was collected
        error = facts["error"]
        raise FatalError(
            str(error.get("absent", error) if isinstance(error, dict) else error), exit_code=ExitCode.FAILED
        )
    return ExitCode.OK


def cmd_bundle(path: str, timeout: float) -> int:
    """`envcheck facts --bundle FILE`: capture the diagnosis inputs in an isolated worker, with the facts."""
    from envcheck.app.output import write_output
    from envcheck.checks.hooks import HOOKS
    from envcheck.core.check import Context
    from envcheck.core.result import Status
    from envcheck.core.runner import Runner
    from envcheck.evidence.bundle import CAPTURE_SPEC, make_bundle

    with Runner(Context(), total_timeout_s=timeout, hooks=HOOKS) as runner:
        (result,) = runner.run([CAPTURE_SPEC])
        facts = runner.facts() if result.status is Status.PASS else {}
    if result.status is not Status.PASS:
        raise FatalError(f"could not capture the bundle: {result.summary}", exit_code=ExitCode.INTERNAL)
    bundle = make_bundle(dict(result.measured["bundle"]), facts, __version__)
    write_output(path, json.dumps(bundle, indent=2, default=str) + "\n")
    if path != "-":
        print(f"wrote {path}: explain it anywhere with `envcheck explain {path}`", file=sys.stderr)
    return ExitCode.OK
