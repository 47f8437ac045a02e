"""The engine's contract: `core` imports nothing from `checks`; check-layer policies arrive as hooks."""

from __future__ import annotations

import ast
from pathlib import Path

from envcheck.checks.hooks import HOOKS
from envcheck.core.check import (
    MEMORY_FRACTION,
    BenchOptions,
    CheckOptions,
    CheckSpec,
    Context,
    DeviceOptions,
    DistOptions,
    Level,
)
from envcheck.core.result import Status
from envcheck.core.runner import Runner
from tests.core import fault_checks

CORE = Path(__file__).resolve().parents[2] / "envcheck" / "core"


def test_core_never_imports_checks() -> None:
    imported = set()
    for path in CORE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported.add((path.name, node.module))
            elif isinstance(node, ast.Import):
                imported.update((path.name, alias.name) for alias in node.names)
    assert len(imported) > 20  # the scan sees the lazy imports inside functions too
    assert [(f, m) for f, m in imported if m.startswith("envcheck.checks")] == []


def test_hooks_reach_the_worker_and_inline_checks() -> None:
    isolated = CheckSpec("test.busy", fault_checks.busy_gpu, "x", group="a")
    inline = CheckSpec("test.busy_inline", fault_checks.busy_gpu, "x", isolated=False)
    with Runner(Context(), hooks=HOOKS) as runner:
        diagnosed, diagnosed_inline = runner.run([isolated, inline])
        facts = runner.facts()
    with Runner(Context()) as runner:  # no hooks: a plain crash, and no facts
        (plain,) = runner.run([isolated])
        no_facts = runner.facts()
    assert diagnosed.status is Status.FAIL and diagnosed_inline.status is Status.FAIL
    assert plain.status is Status.ERROR
    assert "platform" in facts and "error" in no_facts


def test_a_check_knows_its_deadline_capped_by_the_whole_run() -> None:
    own = CheckSpec("test.budget", fault_checks.budget, "x", group="a", timeout_s=50)
    inline = CheckSpec("test.budget_inline", fault_checks.budget, "x", isolated=False, timeout_s=40)
    with Runner(Context()) as runner:
        isolated, local = runner.run([own, inline])
    with Runner(Context(), total_timeout_s=30) as runner:
        (capped,) = runner.run([own])
    assert 40 < isolated.measured["left"] <= 50 and 30 < local.measured["left"] <= 40
    assert 0 < capped.measured["left"] <= 30
    assert Context().time_left() is None


def test_typed_options_cross_into_the_worker_and_back_from_a_report() -> None:
    options = CheckOptions(
        dist=DistOptions(cpu_ranks=3, min_busbw_gbps=5.0, strict_perf=True),
        devices=DeviceOptions(memory_fraction=0.25),
        bench=BenchOptions(cpu_threads=4, envcheck_pid=123),
        front_door="torchrun",
    )
    ctx = Context(level=Level.FULL, allow_cpu=True, expect_gpus=2, options=options)
    with Runner(ctx) as runner:
        result = runner.run_one(CheckSpec("test.echo", fault_checks.echoes_options, "x", group="a"))
    assert result.status is Status.PASS, result
    assert result.measured == {"type": "CheckOptions", **options.to_dict()}
    assert Context.from_dict(ctx.to_dict()) == ctx
    # A report written by another version: unknown keys are ignored, missing ones take the defaults.
    old = Context.from_dict({"level": "quick", "options": {"cpu_ranks": 4, "marker": "x"}})
    assert old.options == CheckOptions(dist=DistOptions(cpu_ranks=4))
    assert old.options.devices.memory_fraction == MEMORY_FRACTION


def test_the_memory_fraction_default_is_the_cli_default() -> None:
    from envcheck.app.main import build_parser

    assert (
        build_parser().parse_args(["run"]).memory_fraction
        == MEMORY_FRACTION
        == CheckOptions().devices.memory_fraction
    )
