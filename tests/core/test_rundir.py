"""The run's private temp dir (envcheck.core.rundir): each worker's TMPDIR, inside the user's, gone with the run.

Real Runner, real forked workers; the checks report what temp dirs they got (tests/core/fault_checks.py).
"""

from __future__ import annotations

import getpass
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from envcheck.checks.check_registry import registry
from envcheck.core import signals
from envcheck.core.check import CheckSpec, Context
from envcheck.core.result import Status
from envcheck.core.runner import Runner
from envcheck.core.signals import Interrupted, interruptible
from tests.core import fault_checks
from tests.helpers import ROOT


def _spec(group: str, func=fault_checks.temp_dirs, timeout_s: float = 60) -> CheckSpec:  # type: ignore[no-untyped-def]
    return CheckSpec(f"test.temp_{group}", func, "x", group=group, timeout_s=timeout_s)


def test_each_worker_gets_its_own_temp_dir_inside_the_users_and_the_run_leaves_none(tmp_path: Path) -> None:
    tmp, cache = tmp_path / "tmp", tmp_path / "my-inductor-cache"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "TORCHINDUCTOR_CACHE_DIR": str(cache)}
    with Runner(Context(), env=env, share_gpu=True) as runner:
        results = runner.run([_spec("a"), _spec("b")])
        run_dir = runner._server.run_dir
        assert run_dir is not None and Path(run_dir).parent == tmp and Path(run_dir).is_dir()
        assert runner.notes == []
    for result in results:
        got = result.measured
        assert result.status is Status.PASS, result
        assert got["TMPDIR"] == got["tempfile"] == os.path.join(run_dir, f"w{got['pid']}")
        assert got["user"] == str(tmp)  # what the compile check's probes name: the user's own temp dir
        assert got["inductor"] == str(cache)  # a cache the user set is the user's: left as it is
    assert list(tmp.iterdir()) == []


def test_groups_forked_after_a_preload_start_with_the_users_environment(tmp_path: Path) -> None:
    """Where GPU groups share one lane (a GPU host: share_gpu=False), the fork server imports what they preload
    (torch._dynamo for the compile checks) before forking the later ones. That import makes Inductor's default cache
    dir and writes it into TORCHINDUCTOR_CACHE_DIR: a worker forked after it must not take that for the user's own
    cache, or the real compile.cpu_isa (its ISA probe built by g++ into Inductor's cache) would compile into the user's
    temp dir and leave it there. No GPU is used: the groups are in the GPU lane because their checks may use one."""
    pytest.importorskip("torch")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    env.pop("TORCHINDUCTOR_CACHE_DIR", None)
    specs = [
        CheckSpec(
            f"test.gpu_{g}", fault_checks.inductor_env, "x", group=g, timeout_s=120, uses_gpu=True, **extra
        )
        for g, extra in (("first", {}), ("preloading", {"preload": ("torch._dynamo",)}))
    ]
    isa = dict(registry())["compile.cpu_isa"]
    assert isa.gpu and isa.preload == ("torch._dynamo",)
    with Runner(Context(allow_cpu=True), env=env, share_gpu=False) as runner:
        *results, compiled = runner.run([*specs, isa])
    assert all(r.status is Status.PASS for r in results), results
    assert [r.measured for r in results] == [{"found": None, "users": None}] * 2
    assert compiled.status is Status.PASS, compiled  # it built and loaded its probe
    assert list(tmp.iterdir()) == []


def _staged_run_dir(tmp_path: Path) -> tuple[Path, Path]:
    """A user's temp dir holding one run's dir, named as `rundir.create` names it: (temp dir, run dir)."""
    tmp = tmp_path / "tmp"
    run_dir = tmp / "envcheck-run-1-x"
    run_dir.mkdir(parents=True)
    return tmp, run_dir


def _python(code: str, tmp: Path) -> str:
    """`code` run by a fresh interpreter whose temp dir is `tmp` and which has no Inductor cache set: its stdout."""
    env = {**os.environ, "TMPDIR": str(tmp)}
    env.pop("TORCHINDUCTOR_CACHE_DIR", None)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_preload_writes_nothing_in_the_users_temp_dir_nor_in_the_workers_environment(
    tmp_path: Path,
) -> None:
    """The fork server imports torch._dynamo for the compile workers forked after it (a GPU host's lane); that import
    makes Inductor's default cache dir and writes it into TORCHINDUCTOR_CACHE_DIR. It does so in the run's shared dir,
    and the environment a later worker inherits is the user's."""
    pytest.importorskip("torch")
    tmp, run_dir = _staged_run_dir(tmp_path)
    out = _python(
        "import json, os, tempfile\n"
        "from envcheck.core.isolation.forkserver import preload\n"
        f"got = preload(['torch._dynamo'], {str(run_dir)!r})\n"
        "env = os.environ.get('TORCHINDUCTOR_CACHE_DIR'), os.environ['TMPDIR'], tempfile.gettempdir()\n"
        "print(json.dumps([got, *env]))",
        tmp,
    )
    got, cache, tmpdir, tempfile_dir = json.loads(out)
    assert got["loaded"] == ["torch._dynamo"] and not got["failed"]
    assert cache is None and tmpdir == tempfile_dir == str(tmp)
    assert [p.name for p in tmp.iterdir()] == [run_dir.name]  # nothing of Inductor's in the user's temp dir
    assert [p.name for p in (run_dir / "shared").iterdir()] == [f"torchinductor_{getpass.getuser()}"]


def test_a_failed_preload_sets_everything_back_and_leaves_no_shared_dir(tmp_path: Path) -> None:
    tmp, run_dir = _staged_run_dir(tmp_path)
    out = _python(
        "import json, os, tempfile\n"
        "from envcheck.core.isolation.forkserver import preload\n"
        f"got = preload(['envcheck_no_such_module'], {str(run_dir)!r})\n"
        "print(json.dumps([got['failed'], os.environ['TMPDIR'], tempfile.gettempdir()]))",
        tmp,
    )
    failed, tmpdir, tempfile_dir = json.loads(out)
    assert list(failed) == ["envcheck_no_such_module"] and tmpdir == tempfile_dir == str(tmp)
    assert list(run_dir.iterdir()) == []  # the shared dir was made for the import and removed again, empty


def test_an_error_message_names_the_users_temp_dir_for_the_workers_and_the_shared_part(
    tmp_path: Path,
) -> None:
    """In a worker, a path in its own temp dir or in the run's shared part is where the user's job would have it."""
    tmp, run_dir = _staged_run_dir(tmp_path)
    out = _python(
        "import os\n"
        "from envcheck.core import rundir\n"
        f"rundir.enter({str(run_dir)!r})\n"
        "own = os.environ['TMPDIR']\n"
        f"print(rundir.user_paths(f'cannot open {run_dir}/shared/torchinductor_u/a.so nor {{own}}/b.o'))",
        tmp,
    )
    assert out.strip() == f"cannot open {tmp}/torchinductor_u/a.so nor {tmp}/b.o"


def test_a_worker_killed_on_timeout_loses_its_temp_dir_at_once(tmp_path: Path) -> None:
    """A real DataLoader worker holds its `pymp-*` dir when the check's timeout kills the group: the dir goes
    with the worker, while the run (and its dir) goes on."""
    pytest.importorskip("torch")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    seen: list[str] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            seen.extend(str(p) for p in tmp.glob("envcheck-run-*/w*/pymp-*"))
            time.sleep(0.02)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    with Runner(Context(), env={**os.environ, "TMPDIR": str(tmp)}, share_gpu=True) as runner:
        (result,) = runner.run([_spec("pymp", fault_checks.holds_a_dataloader, timeout_s=8)])
        stop.set()
        watcher.join()
        assert result.status is Status.ERROR and "timed out" in (result.reason or ""), result
        assert seen, "the DataLoader never made its pymp-* dir, so the next line would prove nothing"
        assert os.listdir(runner._server.run_dir or "") == []
    assert list(tmp.iterdir()) == []


def test_without_a_writable_temp_dir_the_run_goes_on_and_says_so(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir"  # not writable for root too (a read-only mount is in tests/hardened)
    with Runner(Context(), env={**os.environ, "TMPDIR": str(missing)}, share_gpu=True) as runner:
        (result,) = runner.run([_spec("a")])
        notes = runner.notes
    assert result.status is Status.PASS and result.measured["TMPDIR"] == str(missing)
    assert len(notes) == 1 and str(missing) in notes[0] and "not writable" in notes[0]


def test_a_signal_during_clean_up_waits_until_it_is_done() -> None:
    done = []
    with pytest.raises(Interrupted) as stopped, interruptible():
        with signals.deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)  # the handler would run here, cutting the clean-up short
            done.append("clean-up")
    assert done == ["clean-up"] and stopped.value.signum == signal.SIGTERM
    with (
        interruptible(),
        signals.deferred(redeliver=False),
    ):  # already stopping for a signal: not raised again
        os.kill(os.getpid(), signal.SIGHUP)
        time.sleep(0.05)
