"""What `envcheck run` does, as the run goes: request -> mode (envcheck.app.cluster_mode.Mode) -> context -> runner
-> results -> mode.decide -> reports -> the mode's verdict and exit code. Imported when a run starts (its command,
its flags and its request are envcheck.app.commands and run_args)."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from envcheck.app.cluster_mode import Mode
from envcheck.app.render import show_and_write, terminal
from envcheck.app.run_args import RunRequest
from envcheck.app.terminal import Terminal
from envcheck.checks.node.path import node_facts, node_specs, warm_node
from envcheck.core.check import (
    CheckOptions,
    CheckSpec,
    Context,
    DeviceOptions,
    DistOptions,
    Level,
    PerfOptions,
    ProfileOptions,
)
from envcheck.core.result import Result
from envcheck.core.run_report import RunReport
from envcheck.core.runner import Runner
from envcheck.core.selection import parse_names, select
from envcheck.core.signals import Interrupted
from envcheck.core.text import one_line
from envcheck.report.table import print_report


def run(request: RunRequest) -> int:
    """The run, inside the mode `--for` names (under --for, envcheck's own failures never drain the node:
    Mode.guard)."""
    mode = Mode.of(request)
    return mode.guard(lambda: _run(request, mode))


def run_context(request: RunRequest, mode: Mode) -> Context:
    """The run context of a request: a --profile's values, overridden by explicit flags (--expect-gpus,
    --min-busbw); the mode's selection (the node path or the torch path) and name for the checks."""
    profile = request.profile or ProfileOptions()
    # A profile's absolute floor is opt-in (--profile-floors): perf.relative and envcheck fleet judge without one.
    floor = profile.busbw_floor_gbps if request.profile_floors else None
    min_busbw = request.min_busbw if request.min_busbw is not None else floor
    # A floor carries the message size it was measured at: the profile's, unless --min-busbw replaced the floor
    # (then its size is --min-busbw-at's, or none: the peak). --min-busbw-at alone re-sizes the profile's floor.
    at = request.min_busbw_at
    if at is None and request.min_busbw is None:
        at = profile.busbw_floor_bytes
    return Context(
        level=Level(request.level),
        allow_cpu=request.allow_cpu,
        expect_gpus=request.expect_gpus if request.expect_gpus is not None else profile.gpu_count,
        options=CheckOptions(
            dist=DistOptions(
                cpu_ranks=request.cpu_ranks,
                min_busbw_gbps=min_busbw,
                min_busbw_at_bytes=at,
                strict_perf=request.strict_perf,
            ),
            devices=DeviceOptions(memory_fraction=request.memory_fraction),
            profile=profile,
            perf=PerfOptions(margin_pct=request.perf_margin),
            node_path=mode.node_path(parse_names(request.only), profile),
            cluster_mode=mode.name.value if mode.name else None,
        ),
    )


def floors_note(request: RunRequest) -> str | None:
    """What a profile's absolute floor means when --profile-floors applies it: the message size it was measured at."""
    profile = request.profile
    if not request.profile_floors or profile is None or profile.busbw_floor_gbps is None:
        return None
    if request.min_busbw is not None:
        return f"--min-busbw {request.min_busbw:g} replaces profile {profile.profile}'s busbw floor"
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


def _run(request: RunRequest, mode: Mode) -> int:
    ctx = run_context(request, mode)
    if note := floors_note(request):
        _note(note)
    # With --json - or --junit -, stdout carries that report alone (with --for, the verdict line); the table
    # goes to stderr.
    console = terminal(request, to_stderr=mode.table_to_stderr)
    results, facts = _checks(ctx, request, mode, console)
    verdict = mode.decide(results, ctx.expect_gpus)
    report = RunReport(results=verdict.results, facts=facts, context=ctx)
    # every report is attempted whatever happened to the table or the others; under --for their failures are
    # envcheck's own (a warning, never a drain: cluster.own), without --for one line and exit 3
    failures = show_and_write(report, request, console)
    return mode.deliver(verdict, facts, failures)


def _checks(
    ctx: Context, request: RunRequest, mode: Mode, console: Terminal
) -> tuple[list[Result], dict[str, Any]]:
    """The runner: the selected checks, within the mode's budget, and the facts."""
    with swept(), Runner(ctx, total_timeout_s=mode.timeout) as runner:
        if not ctx.options.node_path:
            runner.start()  # torch imports in the fork server while the checks are loaded and selected
        from envcheck.checks.hooks import HOOKS

        runner.hooks = HOOKS
        only, skip = parse_names(request.only), parse_names(request.skip)
        if ctx.options.node_path:  # --for prolog|npd: the node checks inline, no fork server, no torch
            specs = node_specs(node_registry(only, skip), only, skip)
        else:
            from envcheck.checks.check_registry import registry

            runner.prefetch_facts()  # in a worker of their own, beside the checks (off the GPU lane)
            specs = select(registry(), ctx.level, only, skip)
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
            _note(one_line(note))
    return results, facts


def _note(text: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        print(f"envcheck: note: {text}", file=sys.stderr, flush=True)


def node_registry(only: Sequence[str], skip: Sequence[str]) -> Mapping[str, CheckSpec]:
    """The checks the node path picks from: its own registry, which imports no torch-path check; every check when a
    name given to --only or --skip is not one of them (to name what is valid, or to skip a check it would not run
    anyway)."""
    from envcheck.checks.node_path_registry import node_path_checks

    node_checks = node_path_checks()
    if all(name in node_checks for name in (*only, *skip)):
        return node_checks
    from envcheck.checks.check_registry import registry

    return registry()
