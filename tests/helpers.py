"""One helper to run a check the way the CLI does, and a few process-tree utilities."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from envcheck.checks import HOOKS, registry
from envcheck.core.check import CheckOptions, CheckSpec, Context, Level
from envcheck.core.execute import execute
from envcheck.core.result import Result
from envcheck.core.runner import Runner

ROOT = Path(__file__).resolve().parents[1]


def make_context(level: str = "full", allow_cpu: bool = True, expect_gpus: int | None = None,
                 **options: Any) -> Context:
    """A run context as the CLI would build it."""
    return Context(level=Level(level), allow_cpu=allow_cpu, expect_gpus=expect_gpus, options=CheckOptions.from_dict(options))


# The worker environment of a host with no visible GPU: CUDA_VISIBLE_DEVICES="" hides every GPU from CUDA,
# so a test of the no-GPU path means the same on a CPU machine and on a GPU host.
def no_gpu_env() -> dict[str, str]:
    """os.environ with every GPU hidden from CUDA."""
    return {**os.environ, "CUDA_VISIBLE_DEVICES": ""}


def run_check(name: str, *, isolated: bool = True, level: str = "full", allow_cpu: bool = True,
              expect_gpus: int | None = None, env: dict[str, str] | None = None, **options: Any) -> Result:
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


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120,
            python: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run `python -m envcheck ARGS` as a user would; never hangs."""
    full_env = dict(os.environ if env is None else env)
    full_env["PYTHONPATH"] = str(ROOT) + os.pathsep + full_env.get("PYTHONPATH", "")
    return subprocess.run(
        [python or sys.executable, "-m", "envcheck", *args],
        capture_output=True, text=True, timeout=timeout, env=full_env, cwd=ROOT,
    )


def load_report(text: str) -> dict[str, Any]:
    """Parse a run report's JSON and validate it against the published schema (report_schema.json)."""
    import json

    from envcheck.report.json_report import validate_report

    doc: dict[str, Any] = json.loads(text)
    validate_report(doc)
    return doc


def descendants(pid: int) -> list[int]:
    """PIDs of every live descendant of `pid` (from /proc), to prove nothing was orphaned."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def processes_with_marker(marker: str) -> list[int]:
    """PIDs whose environment or command line contains `marker` (to find orphans of a test)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            blob = (entry / "environ").read_bytes() + (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in blob:
            found.append(int(entry.name))
    return found


def wait_for(predicate: Callable[[], object], timeout: float, step: float = 0.05) -> bool:
    """Poll `predicate` until it is true or `timeout` seconds pass; its last answer."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return bool(predicate())


def kill_leftovers(driver: subprocess.Popen[str], marker: str) -> None:
    """A test's teardown: kill the driver's process group if it still runs, then anything carrying `marker`."""
    if driver.poll() is None:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait()
    for pid in processes_with_marker(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def sigint_default() -> None:
    """preexec_fn for a child that a test will Ctrl-C: a shell's background job (`setsid bash .ci/run &`) starts
    with SIGINT ignored and every child inherits that, so the test sets the disposition it relies on."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
