"""The cluster options of `envcheck run` and what happens after the checks ran: class policy, the
one-line reason, the Slurm prolog's verdict and the health check's drain/resume (cluster.slurm_node), the health
check's 60 s budget, and the Prometheus textfile."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from envcheck.app.output import stdout_gone
from envcheck.cluster import slurm_node, streaks
from envcheck.cluster.own import own_failure
from envcheck.cluster.policy import Decision, ModeName, decide, reclassify
from envcheck.cluster.prometheus import render
from envcheck.core.errors import ExitCode, UsageError
from envcheck.core.result import Result

HEALTH_KILL_S = 60  # slurm.conf(5), HealthCheckProgram
HEALTH_CHECKS_S = (
    40.0  # the checks' share; the rest is envcheck's start (~3 s) and at most 2 Slurm calls of 5 s
)


def textfile_path(text: str) -> str:
    """argparse type: a regular file path (not '-') whose folder exists and is writable, its name short enough
    for the temp file beside it (checked before any work, by the same rule as --json)."""
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        raise argparse.ArgumentTypeError("needs prometheus_client: pip install 'envcheck[cluster]'") from None
    path = Path(text)
    if text in ("", "-") or path.is_dir():
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a file path; give e.g. /var/lib/node_exporter/textfile/envcheck.prom"
        )
    from envcheck.app.args import output_path

    return output_path(text)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`--for` and `--prometheus` (validated by argparse, before any check runs)."""
    parser.add_argument(
        "--for",
        dest="for_mode",
        choices=[m.value for m in ModeName],
        metavar="MODE",
        help="exit policy for a cluster: prolog (Slurm Prolog/Epilog), health (Slurm HealthCheckProgram: "
        "drains and resumes the node, within 60 s), preflight (Kubernetes), npd "
        "(node-problem-detector); only node faults fail (see docs/cluster.md)",
    )
    parser.add_argument(
        "--prometheus",
        type=textfile_path,
        metavar="FILE",
        help="write a node_exporter textfile (atomically) with each check's status and key figures",
    )
    parser.add_argument(
        "--drain-after",
        type=streak_count,
        metavar="N",
        help=f"--for health: a soft finding (performance) drains after N health runs in a row "
        f"(default {streaks.DRAIN_AFTER}); a hard one (a lost GPU, ECC, a wedged driver) at once",
    )
    parser.add_argument(
        "--resume-after",
        type=streak_count,
        metavar="M",
        help=f"--for health: a node envcheck drained resumes after M clean runs in a row "
        f"(default {streaks.RESUME_AFTER})",
    )


def streak_count(text: str) -> int:
    """argparse type for --drain-after/--resume-after: a whole number of runs from 1 to 1000."""
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= 1000:
        raise argparse.ArgumentTypeError(f"{text[:20]!r}: give a whole number of health runs from 1 to 1000")
    return int(text)


def mode_of(args: argparse.Namespace) -> ModeName | None:
    """The cluster mode `--for` names, or None."""
    return ModeName(args.for_mode) if getattr(args, "for_mode", None) else None


def adjust(args: argparse.Namespace, results: Sequence[Result]) -> list[Result]:
    """Results as the cluster mode classes them (a node that lost its GPUs is a node fault)."""
    mode = ModeName(args.for_mode) if getattr(args, "for_mode", None) else None
    return reclassify(results, mode, getattr(args, "expect_gpus", None))


def apply_budget(args: argparse.Namespace) -> None:
    """Health mode finishes within slurmd's 60 s (slurm.conf: HealthCheckProgram "will be killed if it does not
    terminate normally within 60 seconds"): the checks get at most HEALTH_CHECKS_S, whatever --timeout says.
    --drain-after and --resume-after belong to health mode alone (bad input elsewhere: exit 2 before any check)."""
    for flag in ("drain_after", "resume_after"):
        if getattr(args, flag, None) is not None and mode_of(args) is not ModeName.HEALTH:
            raise UsageError(
                f"--{flag.replace('_', '-')} applies to --for health only (the health check's streaks)"
            )
    if mode_of(args) is ModeName.HEALTH and (args.timeout is None or args.timeout > HEALTH_CHECKS_S):
        if args.timeout is not None:
            _say(
                f"envcheck: warning: --timeout {args.timeout:g} capped to {HEALTH_CHECKS_S:g} s: slurmd kills a "
                f"HealthCheckProgram after {HEALTH_KILL_S} s",
                sys.stderr,
            )
        args.timeout = HEALTH_CHECKS_S


def _slurm(
    mode: ModeName, decision: Decision, results: Sequence[Result], resume_hold: str | None = None
) -> list[str]:
    """The prolog keeps its verdict for the health check (no Slurm command: the prolog guide's rule); the health
    check drains or resumes the node itself (cluster.slurm_node), a resume held until enough clean runs
    (`resume_hold`, from cluster.streaks)."""
    if mode is ModeName.PROLOG and ("SLURM_JOB_ID" in os.environ or "SLURMD_NODENAME" in os.environ):
        problem = slurm_node.remember_prolog(decision.reason if decision.code else None, os.environ)
        return [problem] if problem else []
    if mode is ModeName.HEALTH:
        for line in slurm_node.act(
            decision.reason if decision.code else "", results, os.environ, resume_hold
        ):
            _say(f"envcheck: {line}", sys.stderr)
    return []


def _prolog_usage_error(mode: ModeName | None) -> tuple[str, ...]:
    """The health check repeats, on every run, a usage error of this node's prolog (which exited 0 so as not to drain
    the node: docs/cluster.md): a warning line, and ("prolog",) for the metrics file that both of them write."""
    if mode is not ModeName.HEALTH:
        return ()
    problem = slurm_node.prolog_usage_error(os.environ)
    if problem is None:
        return ()
    _say(
        f"envcheck: warning: this node's prolog runs envcheck with a usage error ({problem}): jobs start "
        "without the node check; fix the prolog's command (docs/cluster.md)",
        sys.stderr,
    )
    return ("prolog",)


def _streaks(args: argparse.Namespace, results: Sequence[Result]) -> streaks.Held:
    """Health mode's streaks (cluster.streaks): soft findings wait for --drain-after runs, resumes for
    --resume-after clean runs; the state file is updated here, once per health run."""
    policy = streaks.Policy(
        getattr(args, "drain_after", None) or streaks.DRAIN_AFTER,
        getattr(args, "resume_after", None) or streaks.RESUME_AFTER,
    )
    held = streaks.apply(results, os.environ, policy)
    for note in held.notes:
        _say(f"envcheck: note: {note}", sys.stderr)
    return held


def _say(line: str, out: TextIO) -> str | None:
    """Print one line and flush it; the problem in words when the stream is full or closed."""
    try:
        print(line, file=out, flush=True)
    except (OSError, ValueError) as exc:
        if out is sys.stdout:
            stdout_gone()  # the interpreter's last flush must not fail again (exit 120)
        return f"{'stdout' if out is sys.stdout else 'stderr'} not written: {getattr(exc, 'strerror', None) or exc}"
    return None


def finish(
    args: argparse.Namespace,
    results: Sequence[Result],
    facts: Mapping[str, Any],
    code: int,
    own: Sequence[str] = (),
) -> int:
    """Apply --for (exit code, reason line, warnings) and write --prometheus; returns the exit code. `own` are
    envcheck's own failures so far (a report not written, the table not shown): in a cluster mode each is a
    warning that never drains the node; outside one they are the caller's to raise."""
    mode = ModeName(args.for_mode) if getattr(args, "for_mode", None) else None
    problems = list(own)
    resume_hold = None
    if (
        mode is ModeName.HEALTH
    ):  # the hook: soft findings and resumes judged over runs, before the policy decides
        held = _streaks(args, results)
        results, resume_hold = held.results, held.resume_hold
        problems += held.problems
    if mode is not None:
        decision = decide(results, mode)
        # keep `--json -`/`--junit -` pure
        out = sys.stderr if "-" in (getattr(args, "json", None), getattr(args, "junit", None)) else sys.stdout
        for line in decision.warnings:
            _say(f"envcheck: warning: {line}", sys.stderr)
        if decision.reason:
            said = _say(decision.reason, out)  # npd's message, the prolog's log, the pod's log
        elif mode is ModeName.NPD:
            said = _say(
                "envcheck: node OK" if decision.code == ExitCode.OK else "envcheck: could not judge the node",
                out,
            )
        else:
            said = None
        problems += [said] if said else []
        problems += _slurm(mode, decision, results, resume_hold)
        code = decision.code
    carried = _prolog_usage_error(mode)
    if getattr(args, "prometheus", None):
        from envcheck.app.output import WriteError, write_output

        try:  # the one writer (envcheck.app.output): atomic, regular files only, one error mapping
            write_output(
                args.prometheus,
                render(
                    results, facts, mode=mode.value if mode else "run", exit_code=code, usage_errors=carried
                ),
            )
        except WriteError as exc:  # envcheck's own failure: never evidence against the node
            problems.append(f"metrics not written to {args.prometheus}: {exc.message}")
    if mode is None and problems:
        return own_failure(None, code, "; ".join(dict.fromkeys(problems)))  # raises: exit 3, one line
    for what in problems:
        code = own_failure(mode, code, what)
    return code
