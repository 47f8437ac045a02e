"""A cluster mode as one object: `Mode` is what changes around a run under `--for prolog|health|npd|preflight`, or
none (a plain run). It owns its budget, its selection (the torch-free node path or the torch path), how it
reclassifies and decides the results, what it writes (the verdict line, Slurm's node state, the health check's
streaks, the Prometheus textfile) and its exit code; a run (envcheck.app.run_command) asks `Mode.of(request)` once and
hands it each step.
The rules it applies live in envcheck.cluster: the exit policy by fault class (policy), envcheck's own failures never
drain a node (own), the streaks, Slurm's node state (slurm_node) and the textfile (prometheus)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from envcheck.app.guard import save_traceback
from envcheck.app.output import WriteError, say, write_output
from envcheck.app.run_args import RunRequest
from envcheck.cluster import slurm_node, streaks
from envcheck.cluster.mode_names import DRAIN_AFTER, RESUME_AFTER, ModeName
from envcheck.cluster.own import guarded, own_failure
from envcheck.cluster.policy import Decision, decide, reclassify
from envcheck.cluster.prometheus import render
from envcheck.core.check import ProfileOptions
from envcheck.core.errors import ExitCode, UsageError
from envcheck.core.result import Result
from envcheck.report.summary import exit_code

HEALTH_KILL_S = 60  # slurm.conf(5), HealthCheckProgram
# The checks' share of it; the rest is envcheck's start (~3 s) and at most 2 Slurm calls of 5 s.
HEALTH_CHECKS_S = 40.0


@dataclass(frozen=True)
class Verdict:
    """What a mode decided about one run, before it says so."""

    results: list[Result]  # as the reports show them (a node that lost its GPUs: the node's fault)
    judged: list[Result]  # as the exit code was decided (health: soft findings held over runs)
    decision: Decision
    notes: tuple[str, ...] = ()  # the streaks' notes
    problems: tuple[str, ...] = ()  # envcheck's own failures on the way (the streaks' state not kept)
    resume_hold: str | None = None  # why a node envcheck drained may not resume yet (None: it may)


class Mode:
    """What changes around a run; this base is the plain run (no `--for`), and each cluster mode below overrides its
    steps. A plain run's exit code is its results' (1 when a check failed or errored); a report or metrics file it
    could not write is its own error (one line, exit 3); --prometheus is written as mode "run"."""

    name: ModeName | None = None
    on_node = (
        False  # run by the cluster on the node itself: lost GPUs are the node's; a node profile is torch-free
    )
    keeps_streaks = False  # takes --drain-after and --resume-after
    table_to_stderr = False  # stdout carries the verdict line instead (with `--json -`, the report alone)

    def __init__(self, request: RunRequest) -> None:
        """Refuse what only another mode takes (bad input: exit 2, before any check), and take this mode's budget."""
        for flag, value in (("--drain-after", request.drain_after), ("--resume-after", request.resume_after)):
            if value is not None and not self.keeps_streaks:
                raise UsageError(f"{flag} applies to --for health only (the health check's streaks)")
        self.timeout = self.budget(request.timeout)
        self.prometheus = request.prometheus
        self.verdict_to_stderr = request.report_on_stdout  # keep `--json -`/`--junit -` pure

    @staticmethod
    def of(request: RunRequest) -> Mode:
        """The mode `--for` names, or a plain run."""
        return MODES[request.for_mode](request)

    @property
    def label(self) -> str:
        """The mode in the metrics file: `--for`'s value, or "run"."""
        return self.name.value if self.name else "run"

    def budget(self, timeout: float | None) -> float | None:
        """The whole run's cap in seconds (None: none): --timeout's."""
        return timeout

    def node_path(self, only: Sequence[str], profile: ProfileOptions) -> bool:
        """Whether the run takes the torch-free node path (the node checks inline: no fork server, no torch): for
        `--only` naming node-path checks alone (those with a node_order: node.cuda_driver, gpu.health, dcgm.diag,
        node.profile; an epilog's `--only gpu.health,dcgm.diag`) in any mode; else on the node itself unless the
        profile's level is "torch"."""
        if only:
            from envcheck.checks.node_path_registry import node_path_checks

            return all(name in node_path_checks() for name in only)
        return self.on_node and profile.level == "node"

    def guard(self, body: Callable[[], int]) -> int:
        """Run the whole run; a plain run's failures are the app's error handler's (envcheck.app.guard)."""
        return body()

    def decide(self, results: Sequence[Result], expect_gpus: int | None) -> Verdict:
        """A plain run's results stand as they are; its exit code is theirs."""
        return Verdict(list(results), list(results), Decision(exit_code(results), "", ()))

    def deliver(self, verdict: Verdict, facts: Mapping[str, Any], own: Sequence[str] = ()) -> int:
        """Say the verdict, tell Slurm, write --prometheus; the exit code. `own`: envcheck's own failures so far (a
        report not written, the table not shown)."""
        problems = [*own, *verdict.problems, *self._say(verdict), *self._tell_slurm(verdict)]
        carried = self._carried_usage_errors()
        if self.prometheus:
            try:  # the one writer (envcheck.app.output): atomic, regular files only, one error mapping
                write_output(
                    self.prometheus,
                    render(
                        verdict.judged,
                        facts,
                        mode=self.label,
                        exit_code=verdict.decision.code,
                        usage_errors=carried,
                    ),
                )
            except WriteError as exc:  # envcheck's own failure: never evidence against the node
                problems.append(f"metrics not written to {self.prometheus}: {exc.message}")
        return self._exit(verdict.decision.code, problems)

    def _say(self, verdict: Verdict) -> list[str]:
        """Print what the mode says beside the table (a plain run: nothing); the lines that could not be written."""
        return []

    def _tell_slurm(self, verdict: Verdict) -> list[str]:
        """Tell Slurm what this run found (a plain run: nothing); the problems."""
        return []

    def _carried_usage_errors(self) -> tuple[str, ...]:
        """Other modes whose command was found wrong, for the metrics file (only the health check carries one)."""
        return ()

    def _exit(self, code: int, problems: Sequence[str]) -> int:
        """A plain run's own failures are its error: one line, exit 3 (raised)."""
        if problems:
            return own_failure(None, code, "; ".join(dict.fromkeys(problems)))  # raises
        return code


class ClusterMode(Mode):
    """What every `--for` shares: the exit policy by fault class (only a node fault fails the node's gate), the
    policy's warnings and its one-line reason, and envcheck's own failures as warnings that never drain a node."""

    name: ModeName
    table_to_stderr = True

    def guard(self, body: Callable[[], int]) -> int:
        """A crash, a resource limit or a report not written is envcheck's own failure, never the node's (cluster.own)."""
        return guarded(self.name, body, lambda: save_traceback("envcheck"))

    def decide(self, results: Sequence[Result], expect_gpus: int | None) -> Verdict:
        """Reclassify (a host short of --expect-gpus lost them: the node's fault), then the policy's decision."""
        shown = reclassify(results, self.name, expect_gpus)
        return Verdict(shown, shown, decide(shown, self.name))

    def _say(self, verdict: Verdict) -> list[str]:
        """The notes and warnings on stderr, then the verdict line on stdout (stderr when a report takes stdout):
        npd's message, the prolog's log, the pod's log."""
        for note in verdict.notes:
            say(f"envcheck: note: {note}", sys.stderr)
        for warning in verdict.decision.warnings:
            say(f"envcheck: warning: {warning}", sys.stderr)
        line = self._verdict_line(verdict.decision)
        said = say(line, sys.stderr if self.verdict_to_stderr else sys.stdout) if line else None
        return [said] if said else []

    def _verdict_line(self, decision: Decision) -> str | None:
        """The reason a node fault fails the gate; nothing when none did."""
        return decision.reason or None

    def _exit(self, code: int, problems: Sequence[str]) -> int:
        """Each of envcheck's own failures is a warning line; the code keeps the node's verdict (npd: unknown)."""
        for what in problems:
            code = own_failure(self.name, code, what)
        return code


class Preflight(ClusterMode):
    """`--for preflight`: a Kubernetes Job before the training pods; a node fault exits 10 (retry elsewhere)."""

    name = ModeName.PREFLIGHT


class Prolog(ClusterMode):
    """`--for prolog`: Slurm's Prolog/Epilog, where a non-zero exit drains the node. Its verdict is kept for the
    health check (no Slurm command in a prolog: the prolog guide's rule)."""

    name = ModeName.PROLOG
    on_node = True

    def _tell_slurm(self, verdict: Verdict) -> list[str]:
        """Under slurmd, keep the verdict in the state file for the health check to act on."""
        if "SLURM_JOB_ID" not in os.environ and "SLURMD_NODENAME" not in os.environ:
            return []
        decision = verdict.decision
        problem = slurm_node.remember_prolog(decision.reason if decision.code else None, os.environ)
        return [problem] if problem else []


class Npd(ClusterMode):
    """`--for npd`: a node-problem-detector plugin, which reads 0 (OK), 1 (problem) and 2 (unknown) and shows the
    message it printed."""

    name = ModeName.NPD
    on_node = True

    def _verdict_line(self, decision: Decision) -> str | None:
        """npd shows a message whatever the verdict."""
        if decision.reason:
            return decision.reason
        return "envcheck: node OK" if decision.code == ExitCode.OK else "envcheck: could not judge the node"


class Health(ClusterMode):
    """`--for health`: Slurm's HealthCheckProgram. It finishes within slurmd's 60 s, holds a soft finding until it
    repeats (--drain-after) and a resume until clean runs repeat (--resume-after), drains and resumes the node itself
    (cluster.slurm_node), and repeats a usage error of this node's prolog on every run."""

    name = ModeName.HEALTH
    on_node = True
    keeps_streaks = True

    def __init__(self, request: RunRequest) -> None:
        """The streaks' N and M (cluster.streaks' defaults unless given)."""
        super().__init__(request)
        self.streaks = streaks.Policy(
            request.drain_after or DRAIN_AFTER, request.resume_after or RESUME_AFTER
        )

    def budget(self, timeout: float | None) -> float | None:
        """At most HEALTH_CHECKS_S for the checks, whatever --timeout says (slurm.conf: HealthCheckProgram "will be
        killed if it does not terminate normally within 60 seconds")."""
        if timeout is not None and timeout <= HEALTH_CHECKS_S:
            return timeout
        if timeout is not None:
            say(
                f"envcheck: warning: --timeout {timeout:g} capped to {HEALTH_CHECKS_S:g} s: slurmd kills a "
                f"HealthCheckProgram after {HEALTH_KILL_S} s",
                sys.stderr,
            )
        return HEALTH_CHECKS_S

    def decide(self, results: Sequence[Result], expect_gpus: int | None) -> Verdict:
        """Count this run into the streaks (their state file is updated here, once per health run), then decide on
        the held results: a soft finding waits for --drain-after runs in a row."""
        shown = reclassify(results, ModeName.HEALTH, expect_gpus)
        held = streaks.apply(shown, os.environ, self.streaks)
        return Verdict(
            shown,
            held.results,
            decide(held.results, ModeName.HEALTH),
            tuple(held.notes),
            tuple(held.problems),
            held.resume_hold,
        )

    def _tell_slurm(self, verdict: Verdict) -> list[str]:
        """Drain or resume the node (a resume held until enough clean runs)."""
        decision = verdict.decision
        reason = decision.reason if decision.code else ""
        for line in slurm_node.act(reason, verdict.judged, os.environ, verdict.resume_hold):
            say(f"envcheck: {line}", sys.stderr)
        return []

    def _carried_usage_errors(self) -> tuple[str, ...]:
        """A usage error of this node's prolog (which exited 0 so as not to drain the node: docs/cluster.md): a
        warning line on every run, and ("prolog",) for the metrics file that both of them write."""
        problem = slurm_node.prolog_usage_error(os.environ)
        if problem is None:
            return ()
        say(
            f"envcheck: warning: this node's prolog runs envcheck with a usage error ({problem}): jobs start "
            "without the node check; fix the prolog's command (docs/cluster.md)",
            sys.stderr,
        )
        return ("prolog",)


# `--for`'s value -> its mode (None: a plain run); reached by reference, checked by mypy.
MODES: dict[str | None, type[Mode]] = {
    None: Mode,
    ModeName.PREFLIGHT.value: Preflight,
    ModeName.PROLOG.value: Prolog,
    ModeName.NPD.value: Npd,
    ModeName.HEALTH.value: Health,
}
