"""What `run`, `list` and `facts` do once their arguments are parsed."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Iterator

from rich.table import Table
from rich.text import Text

from envcheck import __version__
from envcheck.app import cluster_mode as cluster
from envcheck.app.guard import save_traceback
from envcheck.app.output import Terminal, raise_failures, write_reports
from envcheck.app.render import show_and_write, terminal
from envcheck.checks.node.path import node_facts, node_specs, warm_node
from envcheck.cluster.own import guarded
from envcheck.core.check import (
    CheckOptions,
    Context,
    DeviceOptions,
    DistOptions,
    Level,
    PerfOptions,
    ProfileOptions,
)
from envcheck.core.errors import ExitCode, FatalError
from envcheck.core.redact import redact_deep
from envcheck.core.run_report import RunReport
from envcheck.core.runner import Runner
from envcheck.core.selection import parse_names, select
from envcheck.core.signals import Interrupted
from envcheck.core.text import one_line, visible
from envcheck.report.summary import exit_code
from envcheck.report.table import print_facts, print_report


def context_from_args(args: argparse.Namespace) -> Context:
    """Build the run context from parsed `run` arguments: a --profile's values, overridden by explicit flags
    (--expect-gpus, --min-busbw); `args.expect_gpus` is set to the result, so the cluster policy sees it too."""
    profile = getattr(args, "profile", None) or ProfileOptions()
    if args.expect_gpus is None:
        args.expect_gpus = profile.gpu_count
    # A profile's absolute floor is opt-in (--profile-floors): perf.relative and envcheck fleet judge without one.
    floor = profile.busbw_floor_gbps if getattr(args, "profile_floors", False) else None
    min_busbw = args.min_busbw if args.min_busbw is not None else floor
    # A floor carries the message size it was measured at: the profile's, unless --min-busbw replaced the floor
    # (then its size is --min-busbw-at's, or none: the peak). --min-busbw-at alone re-sizes the profile's floor.
    at = getattr(args, "min_busbw_at", None)
    if at is None and args.min_busbw is None:
        at = profile.busbw_floor_bytes
    return Context(
        level=Level(args.level),
        allow_cpu=args.allow_cpu,
        expect_gpus=args.expect_gpus,
        options=CheckOptions(
            dist=DistOptions(
                cpu_ranks=args.cpu_ranks,
                min_busbw_gbps=min_busbw,
                min_busbw_at_bytes=at,
                strict_perf=args.strict_perf,
            ),
            devices=DeviceOptions(memory_fraction=args.memory_fraction),
            profile=profile,
            perf=PerfOptions(margin_pct=getattr(args, "perf_margin", 10.0)),
            node_path=node_path(args, profile),
            cluster_mode=getattr(args, "for_mode", None),
        ),
    )


def floors_note(args: argparse.Namespace) -> str | None:
    """What a profile's absolute floor means when --profile-floors applies it: the message size it was measured at."""
    profile = getattr(args, "profile", None)
    if not getattr(args, "profile_floors", False) or profile is None or profile.busbw_floor_gbps is None:
        return None
    if args.min_busbw is not None:
        return f"--min-busbw {args.min_busbw:g} replaces profile {profile.profile}'s busbw floor"
    size = profile.busbw_floor_bytes
    if size is None:
        return (
            f"--profile-floors: profile {profile.profile}'s busbw floor {profile.busbw_floor_gbps:g} GB/s states no "
            "message size; dist.busbw compares it with its sweep's peak"
        )
    return (
        f"--profile-floors: profile {profile.profile}'s busbw floor {profile.busbw_floor_gbps:g} GB/s was measured at "
        f"a {size / 2**30:g} GiB all-reduce message; dist.busbw judges it only at that size"
    )


def node_path(args: argparse.Namespace, profile: ProfileOptions) -> bool:
    """`--for prolog|npd` without --only (unless the profile's level is "torch"), or --only naming checks of the
    spec group "node" alone (node.cuda_driver, node.profile): the torch-free node path."""
    only = parse_names(getattr(args, "only", None))
    if (
        only
    ):  # `--only node.cuda_driver,node.profile`: the same torch-free path, for checks whose spec says so
        from envcheck.checks import registry

        specs = registry()
        return all(name in specs and specs[name].group == "node" for name in only)
    return getattr(args, "for_mode", None) in ("prolog", "npd", "health") and profile.level == "node"


@contextlib.contextmanager
def swept() -> Iterator[None]:
    """On the way out (any path, after the Runner killed its workers): remove the launcher work directories of
    workers that died without cleaning up (killed on timeout, by Ctrl-C or SIGTERM)."""
    started = time.time()
    try:
        yield
    finally:
        from envcheck.collectives.workdirs import sweep_after_run

        sweep_after_run(started)


def cmd_run(args: argparse.Namespace) -> int:
    """Run the selected checks and render every requested report; under --for, envcheck's own failures never
    drain the node (envcheck.cluster.own)."""
    mode = cluster.mode_of(args)
    cluster.apply_budget(args)
    return (
        _run(args) if mode is None else guarded(mode, lambda: _run(args), lambda: save_traceback("envcheck"))
    )


def _run(args: argparse.Namespace) -> int:
    ctx = context_from_args(args)
    if note := floors_note(args):
        with contextlib.suppress(OSError, ValueError):
            print(f"envcheck: note: {note}", file=sys.stderr, flush=True)
    # With --json - or --junit -, stdout carries that report alone (with --for, the verdict line); the table
    # goes to stderr.
    console = terminal(args, to_stderr=bool(getattr(args, "for_mode", None)))
    with swept(), Runner(ctx, total_timeout_s=args.timeout) as runner:
        if not ctx.options.node_path:
            runner.start()  # torch imports in the fork server while the checks are loaded and selected
        from envcheck.checks import HOOKS, registry

        runner.hooks = HOOKS
        if ctx.options.node_path:  # --for prolog|npd: the node checks inline, no fork server, no torch
            specs = node_specs(registry(), parse_names(args.only), parse_names(args.skip))
        else:
            runner.prefetch_facts()  # in a worker of their own, beside the checks (off the GPU lane)
            specs = select(registry(), ctx.level, parse_names(args.only), parse_names(args.skip))
        try:
            with warm_node(runner.time_left()) if ctx.options.node_path else contextlib.nullcontext():
                results = runner.run(specs)
        except Interrupted:  # SIGTERM/SIGHUP: kill every worker, then report what finished
            runner.abort()
            partial = RunReport(results=list(runner.finished), context=ctx)
            print_report(partial, console)
            raise
        facts = node_facts(results) if ctx.options.node_path else runner.facts()
        for (
            note
        ) in runner.notes:  # e.g. no writable temp dir for the run's private one: the run went on without
            with contextlib.suppress(OSError, ValueError):
                print(f"envcheck: note: {one_line(note)}", file=sys.stderr, flush=True)
    results = cluster.adjust(args, results)
    report = RunReport(results=results, facts=facts, context=ctx)
    # every report is attempted whatever happened to the table or the others; under --for their failures are
    # envcheck's own (a warning, never a drain: cluster.own), without --for one line and exit 3
    failures = show_and_write(report, args, console)
    return cluster.finish(args, results, facts, exit_code(results), failures)


def cmd_list(args: argparse.Namespace) -> int:
    """Print every check with its level, needs and timeout."""
    from envcheck.checks import registry

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


def cmd_facts(args: argparse.Namespace) -> int:
    """Collect and print (or write) the environment facts."""
    if getattr(args, "bundle", None):  # `facts --bundle FILE`: envcheck.explain captures
        return cmd_bundle(args)
    from envcheck.checks import HOOKS

    with Runner(Context(), total_timeout_s=args.timeout, hooks=HOOKS) as runner:
        facts = runner.facts()
    if args.json != "-":
        print_facts(facts, Terminal(highlight=False))
    raise_failures(
        write_reports([(args.json, lambda: json.dumps(redact_deep(facts), indent=2, default=str) + "\n")])
    )
    if set(facts) == {"error"}:  # the worker crashed or timed out: nothing was collected
        error = facts["error"]
        raise FatalError(
            str(error.get("absent", error) if isinstance(error, dict) else error), exit_code=ExitCode.FAILED
        )
    return ExitCode.OK


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
        raise FatalError(f"could not capture the bundle: {result.summary}", exit_code=ExitCode.INTERNAL)
    bundle = make_bundle(dict(result.measured["bundle"]), facts, __version__)
    write_output(args.bundle, json.dumps(bundle, indent=2, default=str) + "\n")
    if args.bundle != "-":
        print(
            f"wrote {args.bundle}: explain it anywhere with `envcheck explain {args.bundle}`", file=sys.stderr
        )
    return ExitCode.OK
