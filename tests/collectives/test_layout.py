"""The package's shape: one module per collective over shared launcher/verifier/timing, and no
module-global state coupling two checks (the old `_MEMO` made dist.collectives reuse dist.all_reduce's
launch, so a fault or an environment change between them went unseen)."""

from __future__ import annotations

import importlib
import pkgutil
import types
from types import MappingProxyType
from typing import Any

import pytest

import envcheck.collectives as package
from envcheck.checks.dist import launches
from envcheck.collectives import rank_plan, registry
from envcheck.collectives.launch import LaunchOutcome, LaunchPlan, launch
from tests.helpers import make_context


def _modules() -> list[types.ModuleType]:
    return [
        importlib.import_module(f"{package.__name__}.{m.name}")
        for m in pkgutil.iter_modules(package.__path__)
    ]


def test_no_module_holds_mutable_global_state() -> None:
    for module in _modules():
        for name, value in vars(module).items():
            if name.startswith("__"):
                continue
            assert not isinstance(value, (dict, list, set, bytearray)), (
                f"{module.__name__}.{name} is mutable state"
            )


def test_each_correctness_check_launches_its_own_ranks() -> None:
    """Real gloo ranks; the launcher is the real one, counted."""
    plans: list[LaunchPlan] = []

    def counting(plan: LaunchPlan) -> LaunchOutcome:
        plans.append(plan)
        return launch(plan)

    ctx = make_context("quick", cpu_ranks=2)
    first = launches.nccl_all_reduce(ctx, counting)  # the check body now sits beside its spec (checks/dist)
    second = launches.all_gather_broadcast(ctx, counting)
    assert first.status.value == "pass" and second.status.value == "pass", (first.summary, second.summary)
    assert [p.steps for p in plans] == [("all_reduce",), ("all_gather", "broadcast")]


def test_every_collective_module_has_a_rank_side_and_a_judge() -> None:
    for step in ("all_reduce", "all_gather", "broadcast", "sweep"):
        module = rank_plan.collective(step)
        assert callable(module.run) and callable(module.judge)
    for bad in ("launch", "nope", "../x"):
        with pytest.raises(ValueError, match="not a collective"):
            rank_plan.collective(bad)


def test_a_new_collective_is_one_module(monkeypatch: pytest.MonkeyPatch) -> None:
    """A module with run() and judge() and its line in the registry is all the ranks and the judging need.
    (A collective is reached through the typed registry, never by importing a computed name such as
    `envcheck.collectives.<step>`, so the new module is registered, not planted in sys.modules.)"""
    name = f"{package.__name__}.fake_reduce_scatter"
    fake = types.ModuleType(name)
    fake.run = lambda rc: {"elements": 3, "wrong": 0, "rank": rc.rank}  # type: ignore[attr-defined]
    fake.judge = lambda findings, backend, world, options: len(findings)  # type: ignore[attr-defined]
    monkeypatch.setattr(
        registry, "COLLECTIVES", MappingProxyType({**registry.COLLECTIVES, "fake_reduce_scatter": fake})
    )
    phases: list[str] = []
    found: dict[str, Any] = rank_plan.run_plan(0, 1, "cpu", ("fake_reduce_scatter",), (), phases.append)
    assert found["fake_reduce_scatter"] == {"elements": 3, "wrong": 0, "rank": 0} and phases == ["done"]
    assert rank_plan.collective("fake_reduce_scatter").judge([found], "gloo", 1, {}) == 1
