"""One helper to run a check the way the CLI does (through the real engine), and the contexts it uses."""

from __future__ import annotations

import os
from typing import Any

from envcheck.checks.check_registry import registry
from envcheck.checks.hooks import HOOKS
from envcheck.core.check import CheckOptions, CheckSpec, Context, Level
from envcheck.core.execute import execute
from envcheck.core.result import Result
from envcheck.core.runner import Runner


def make_context(
    level: str = "full", allow_cpu: bool = True, expect_gpus: int | None = None, **options: Any
) -> Context:
    """A run context as the CLI would build it."""
    return Context(
        level=Level(level),
        allow_cpu=allow_cpu,
        expect_gpus=expect_gpus,
        options=CheckOptions.from_dict(options),
    )


# The worker environment of a host with no visible GPU: CUDA_VISIBLE_DEVICES="" hides every GPU from CUDA,
# so a test of the no-GPU path means the same on a CPU machine and on a GPU host.
def no_gpu_env() -> dict[str, str]:
    """os.environ with every GPU hidden from CUDA."""
    return {**os.environ, "CUDA_VISIBLE_DEVICES": ""}


def run_check(
    name: str,
    *,
    isolated: bool = True,
    level: str = "full",
    allow_cpu: bool = True,
    expect_gpus: int | None = None,
    env: dict[str, str] | None = None,
    **options: Any,
) -> Result:
    """Run one registered check through the real engine (a spawned worker when isolated, with `env`)."""
    spec = registry()[name]
    ctx = make_context(level, allow_cpu, expect_gpus, **options)
    if not isolated:
        return execute(spec, ctx)
    with Runner(ctx, env=env, hooks=HOOKS) as runner:
        return runner.run_one(spec)


def run_spec(spec: CheckSpec, **options: Any) -> Result:
    """Run an ad-hoc spec (e.g. one with an injected fault) in this process."""
    return execute(spec, make_context(**options))
