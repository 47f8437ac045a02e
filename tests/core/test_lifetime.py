"""Workers never outlive envcheck, whatever ends it; junk at import and a hung start-up are harmless.

Real processes and real signals: a driver runs the real Runner with two hung checks (each with a grandchild),
the test signals it, then scans /proc for any process that still carries the run's marker.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest

from envcheck.checks.hooks import HOOKS
from envcheck.core.check import CheckSpec, Context
from envcheck.core.result import Status
from envcheck.core.runner import Runner
from tests.core import fault_checks
from tests.helpers import ROOT, kill_leftovers, processes_with_marker, sigint_default, wait_for


def _grandchildren(marker: str) -> list[int]:
    found = []
    for pid in processes_with_marker(marker):
        try:
            if b"time.sleep(3600)" in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            pass
    return found


@pytest.mark.parametrize(
    ("how", "expected_rc"),
    [
        ("SIGTERM", 128 + signal.SIGTERM),
        ("SIGHUP", 128 + signal.SIGHUP),
        ("SIGINT", 130),  # Ctrl-C: the terminal signals the foreground group
        ("group SIGKILL", -signal.SIGKILL),
    ],
)
def test_whatever_ends_envcheck_leaves_no_process_behind(how: str, expected_rc: int) -> None:
    marker = f"envcheck-lifetime-{uuid.uuid4().hex}"
    driver = subprocess.Popen(
        [sys.executable, "-m", "tests.core.lifetime_driver", marker],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=sigint_default,
    )
    try:
        assert wait_for(lambda: len(_grandchildren(marker)) >= 2, 60), "the hung checks never started"
        survivors = [p for p in processes_with_marker(marker) if p != driver.pid]
        assert len(survivors) >= 5  # the fork server, two workers, two grandchildren
        if how == "group SIGKILL":
            os.killpg(driver.pid, signal.SIGKILL)
        elif how == "SIGINT":
            os.killpg(driver.pid, signal.SIGINT)
        else:
            os.kill(driver.pid, getattr(signal, how))
        _, err = driver.communicate(timeout=10)
        assert driver.returncode == expected_rc, err
        assert "Traceback" not in err and "Exception in thread" not in err, err
        assert wait_for(lambda: processes_with_marker(marker) == [], 10), (
            f"left behind after {how}: {processes_with_marker(marker)}"
        )
    finally:
        kill_leftovers(driver, marker)


def test_sigterm_reports_what_finished_and_leaves_nothing(tmp_path: Path) -> None:
    """The real `envcheck run`: SIGTERM while a check hangs prints the report of what finished, exits 143."""
    marker = f"envcheck-sigterm-{uuid.uuid4().hex}"
    env = {**os.environ, "ENVCHECK_TEST_MARKER": marker}
    run = subprocess.Popen(
        [sys.executable, "-m", "tests.core.cli_driver", marker],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert wait_for(lambda: len(_grandchildren(marker)) >= 1, 60), "the hung check never started"
        run.send_signal(signal.SIGTERM)
        out, err = run.communicate(timeout=10)
        assert run.returncode == 128 + signal.SIGTERM, err
        assert "test.healthy" in out and "test.hangs" not in out  # what finished, and only that
        assert "stopped by SIGTERM" in err and "Traceback" not in err
        assert wait_for(lambda: processes_with_marker(marker) == [], 10), processes_with_marker(marker)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()


def test_a_check_killed_by_the_abort_is_not_reported_as_finished() -> None:
    """The abort kills the hung check's worker; its lane thread then reads the death. That death is envcheck's
    doing, not the check's: `finished` (what an interrupted run reports) must not gain an ERROR for it, however
    late the lane thread gets there. Real Runner, real worker and grandchild; the abort comes from another thread
    as the SIGTERM handler's does."""
    marker = f"envcheck-abort-{uuid.uuid4().hex}"
    env = {**os.environ, "ENVCHECK_TEST_MARKER": marker}
    specs = [
        CheckSpec("test.healthy", fault_checks.healthy, "x", isolated=False),
        CheckSpec("test.hangs", fault_checks.sleeps_forever, "x", group="hung", timeout_s=600),
    ]
    runner = Runner(Context(), env=env)
    lanes = threading.Thread(target=runner.run, args=(specs,), daemon=True)
    try:
        lanes.start()
        assert wait_for(lambda: len(_grandchildren(marker)) >= 1, 60), "the hung check never started"
        runner.abort()
        lanes.join(30)
        assert not lanes.is_alive(), "run() did not return after the abort"
        assert [r.name for r in runner.finished] == ["test.healthy"], runner.finished
        assert wait_for(lambda: processes_with_marker(marker) == [], 10), processes_with_marker(marker)
    finally:
        runner.abort()
        for pid in processes_with_marker(marker):
            os.kill(pid, signal.SIGKILL)


def _site(tmp_path: Path, body: str) -> dict[str, str]:
    """An environment whose interpreters run `body` as a real sitecustomize.py at start-up."""
    (tmp_path / "sitecustomize.py").write_text(textwrap.dedent(body))
    return {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def test_junk_printed_at_import_leaves_the_protocol_intact(tmp_path: Path) -> None:
    env = _site(
        tmp_path,
        """
        import os, sys
        print('{"banner": "from sitecustomize"', flush=True)
        os.write(1, b"raw junk on fd 1\\n")
        print("junk on stderr", file=sys.stderr)
    """,
    )
    specs = [
        CheckSpec("test.healthy", fault_checks.healthy, "x", group="a"),
        CheckSpec("test.where", fault_checks.where_am_i, "x", group="b"),
    ]
    with Runner(Context(), env=env) as runner:
        healthy, where = runner.run(specs)
    assert healthy.status is Status.PASS and healthy.summary == "fine", healthy
    assert where.status is Status.PASS, where


def test_the_cli_report_survives_a_banner_at_import(tmp_path: Path) -> None:
    env = _site(tmp_path, "print('BANNER from sitecustomize', flush=True)\n")
    out = tmp_path / "r.json"
    from tests.helpers import run_cli

    proc = run_cli("run", "--allow-cpu", "--only", "cuda.available", "--json", str(out), env=env)
    import json

    report = json.loads(out.read_text())
    assert proc.returncode in (0, 1), proc.stderr
    assert "Traceback" not in proc.stderr
    assert [r["name"] for r in report["results"]] == ["cuda.available"]
    assert report["results"][0]["status"] in ("pass", "warn", "skip"), report["results"][0]


def test_a_hung_start_up_is_bounded_named_and_leaves_nothing(tmp_path: Path) -> None:
    marker = f"envcheck-hang-{uuid.uuid4().hex}"
    env = {**_site(tmp_path, "import time\ntime.sleep(3600)\n"), "ENVCHECK_TEST_MARKER": marker}
    specs = [
        CheckSpec("test.a", fault_checks.healthy, "x", group="a", timeout_s=600),
        CheckSpec("test.b", fault_checks.healthy, "x", group="b", timeout_s=600),
    ]
    start = time.monotonic()
    with Runner(Context(), env=env, start_timeout_s=2, hooks=HOOKS) as runner:
        results = runner.run(specs)
        facts = runner.facts()
    assert time.monotonic() - start < 2 + 8
    for result in results:
        assert result.status is Status.ERROR
        assert "did not start within 2s" in (result.reason or "") and "site-packages" in (result.reason or "")
        assert result.measured["worker_failure"] == "start"
    assert "did not start" in facts["error"]["absent"]
    assert wait_for(lambda: processes_with_marker(marker) == [], 5)


def test_groups_are_forked_from_one_server_that_imported_torch_once_and_never_cuda() -> None:
    pytest.importorskip("torch")
    specs = [CheckSpec(f"test.where_{g}", fault_checks.where_am_i, "x", group=g) for g in ("a", "b", "c")]
    with Runner(Context()) as runner:
        results = runner.run(specs)
        server_pid = runner._server.pid
        state = runner._server.request({"op": "state"}, time.monotonic() + 10)
    assert all(r.status is Status.PASS for r in results)
    parents = {r.measured["ppid"] for r in results}
    assert parents == {server_pid} == {state["pid"]}
    assert all(r.measured["torch_preloaded"] for r in results)  # inherited, not imported again
    assert all(r.measured["pgid"] == r.measured["pid"] for r in results)  # each in a group of its own
    assert len({r.measured["pid"] for r in results}) == 3
    assert state["cuda_initialized"] is False and "torch" in state["modules"]


def test_the_fork_server_never_touches_cuda_beyond_reading_a_flag() -> None:
    import ast
    import inspect

    from envcheck.core.isolation import forkserver

    tree = ast.parse(inspect.getsource(forkserver))
    uses = {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "cuda"
    }
    assert uses == {"is_initialized"}


def test_declared_preloads_reach_later_gpu_groups(tmp_path: Path) -> None:
    """`preload` modules are imported in the server after the first forks; a later GPU-lane group inherits
    them (here `json.tool`, which nothing else imports, stands in for torchvision)."""

    def gpu(group: str, preload: tuple[str, ...] = ()) -> CheckSpec:
        return CheckSpec(
            f"test.where_{group}", fault_checks.where_am_i, "x", group=group, uses_gpu=True, preload=preload
        )

    specs = [gpu("a"), gpu("b", ("json.tool",))]
    with Runner(Context(), share_gpu=False) as runner:
        first, later = runner.run(specs)
        state = runner._server.request({"op": "state", "modules": ["json.tool"]}, time.monotonic() + 10)
    assert "json.tool" in state["modules"]
    assert not first.measured["json_tool_preloaded"] and later.measured["json_tool_preloaded"]


def test_a_group_that_preloads_goes_after_the_others_in_the_gpu_lane() -> None:
    """Listed first, the preloading group still runs after the plain one, so the preload overlaps that group
    instead of holding up the lane, and the group that needs the module inherits it."""

    def gpu(group: str, preload: tuple[str, ...] = ()) -> CheckSpec:
        return CheckSpec(
            f"test.where_{group}", fault_checks.where_am_i, "x", group=group, uses_gpu=True, preload=preload
        )

    with Runner(Context(), share_gpu=False) as runner:
        needs, plain = runner.run([gpu("needs", ("json.tool",)), gpu("plain")])
    assert needs.status is Status.PASS and plain.status is Status.PASS
    assert needs.measured["json_tool_preloaded"] and not plain.measured["json_tool_preloaded"]
