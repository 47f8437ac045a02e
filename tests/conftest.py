"""Markers: `gpu` and `docker` skip visibly when the hardware or engine is absent.

CI sets ENVCHECK_REQUIRE_DOCKER=1, which turns a docker skip into a failure. `make test` runs the suite in two phases
(ENVCHECK_TEST_PHASE: `parallel`, then the serial streams `docker`, `cluster` and `long` (then `bulk`) side by
side, then `alone`; the Makefile says why); each test's kind (the marker that puts it in a phase) and markers go
into the junit file as properties, and each phase or stream writes its own junit file, for bench/suite_cost.py.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# The images the Docker tests share, built once per session (tests/images and tests/compose use them).
pytest_plugins = ["tests.helpers.image_fixtures"]

# pytest keeps each test module's rewritten assertions in __pycache__, but not where PYTHONDONTWRITEBYTECODE is set,
# as on CI's machine: there every pytest process rewrote all ~215 test modules and conftests again (collecting the
# suite took 11.1-11.5 s on a quiet machine here, 7.2-8.2 s with the cache), and `make test` collects in each stream
# and each xdist worker. This process (and what it forks) writes .pyc files; the programs it runs still see the
# variable (the tree's own bytecode is `make bytecode`'s).
sys.dont_write_bytecode = False
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ["PYTHONPATH"] = (
    str(Path(__file__).resolve().parents[1]) + os.pathsep + os.environ.get("PYTHONPATH", "")
)
# Every run report rendered by a test, in this process or a child envcheck, is validated against
# envcheck/report/report_schema.json (json_report.to_json_dict reads this).
os.environ["ENVCHECK_VALIDATE_REPORTS"] = "1"

# Importing torch._dynamo (some test modules do, at collection) makes Inductor's default cache dir,
# <temp>/torchinductor_<user>, and writes it into os.environ's TORCHINDUCTOR_CACHE_DIR. Every envcheck a later test
# started with a copy of os.environ then took it for the user's own cache and compiled into the system temp dir, which
# outlived the suite. So the imports make it in a dir of this process's own (removed when the process ends), and each
# test starts and ends with the variable as the session found it (inductor_cache_as_the_session_found_it).
# torch._dynamo is imported here, under that dir: its first import in a process makes the folder, and a test that
# imported it first (any optimizer's construction does) would make it in the system temp dir. Collection ends with
# the variable as the session found it (pytest_collection_finish), before any session or module fixture runs.
INDUCTOR_CACHE_AT_START = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
if INDUCTOR_CACHE_AT_START is None:
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = _import_cache = tempfile.mkdtemp(prefix="pytest-inductor-import-")
    atexit.register(shutil.rmtree, _import_cache, ignore_errors=True)
try:
    import torch._dynamo  # noqa: F401
except ImportError:  # a venv without torch: the tests that need it say so
    pass


def restore_inductor_cache_variable() -> None:
    """TORCHINDUCTOR_CACHE_DIR as the session found it."""
    if INDUCTOR_CACHE_AT_START is None:
        os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
    else:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = INDUCTOR_CACHE_AT_START


# The markers that keep a test out of the parallel phase of `make test` (the Makefile's SERIAL_TESTS), first match
# naming its kind; the others are `parallel`.
SERIAL_KINDS = ("bulk", "docker", "slurm", "timing", "host", "install", "long")
REPORTED_MARKERS = ("bulk", "docker", "slurm", "timing", "host", "install", "long", "slow", "gpu")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Under `make test`, each phase or stream writes its own junit file (`X.xml` becomes `X-parallel.xml`,
    `X-docker.xml`, ...): PYTEST_ARGS reaches every one, and each would overwrite the others'. Before junitxml reads
    the path."""
    # `make test` starts the streams that run beside its foreground one as background jobs of a shell without job
    # control, which start with SIGINT ignored (and Python keeps it so): a Ctrl-C, which reaches the whole foreground
    # process group, would stop one stream and leave the others running their tests, clusters and containers. With
    # Python's own handler back, each stops and runs its teardowns.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    phase = os.environ.get("ENVCHECK_TEST_PHASE", "")
    path = getattr(config.option, "xmlpath", None)
    if phase and path and not hasattr(config, "workerinput"):
        stem, dot, ext = path.rpartition(".")
        config.option.xmlpath = f"{stem}-{phase}.{ext}" if dot else f"{path}-{phase}"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Under `make test`, this phase's failed tests go into the list it prints last (tests/helpers/failure_list)."""
    from tests.helpers import failure_list

    path = os.environ.get(failure_list.VARIABLE)
    # under xdist the controller lists every worker's failures; a worker listing its own would repeat them
    if path and not hasattr(terminalreporter.config, "workerinput"):
        stats = terminalreporter.stats
        failed = [*stats.get("failed", []), *stats.get("error", [])]
        failure_list.append(path, os.environ.get("ENVCHECK_TEST_PHASE", "") or "pytest", failed)


def pytest_collection_finish(session: pytest.Session) -> None:
    restore_inductor_cache_variable()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        names = [m for m in REPORTED_MARKERS if item.get_closest_marker(m) is not None]
        kind = next((m for m in SERIAL_KINDS if m in names), "parallel")
        item.user_properties += [("kind", kind), ("markers", ",".join(names))]


@pytest.fixture(scope="session", autouse=True)
def no_run_dir_left_in_the_system_temp_dir() -> Iterator[None]:
    """Nothing is left behind: a run dir a test left in the system temp dir, or Inductor's default cache made there
    during the session, fails the session (tests/helpers/temp_guard)."""
    from tests.helpers import temp_guard

    base = temp_guard.system_temp()
    before = temp_guard.run_dirs(base)
    cache_before = temp_guard.inductor_default_cache(base)
    yield
    left = temp_guard.left_behind(base, before)
    assert not left, f"envcheck run dirs left behind in {base} by this session: {left}"
    cache = temp_guard.inductor_default_cache(base)
    assert cache is None or cache == cache_before, (
        f"Inductor's default cache {cache[0]} was made or written during this session (by one of its tests, or of a"
        " stream running beside it): Inductor was imported or compiled with no TORCHINDUCTOR_CACHE_DIR or temp dir of"
        " the test's own"
    )


@pytest.fixture(autouse=True)
def inductor_cache_as_the_session_found_it() -> Iterator[None]:
    """TORCHINDUCTOR_CACHE_DIR as the session found it, before and after each test: Inductor writes it into os.environ
    at its first use in this process, and what one test's compile wrote is no setting of the next test's envcheck."""

    restore_inductor_cache_variable()
    yield
    restore_inductor_cache_variable()


@pytest.fixture(scope="session")
def full_level_compile_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One Inductor cache for the session's whole full levels whose point is not compiling (the order test's, the
    report formats'): the compile checks compile for real in the first and find their kernels in Inductor's cache in
    the others, which their verdicts must not depend on (the order test's second order always did). A test that
    uses it alone compiles cold. The compile checks' own tests compile in cold caches of their own."""
    return tmp_path_factory.mktemp("full-level-inductor")


@functools.cache
def _gpu_missing() -> str | None:
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA device visible (GPU-only test; run it on a GPU host)"
    return None


@functools.cache
def _docker_missing() -> str | None:
    try:
        import docker

        client = docker.from_env(timeout=10)
        client.ping()
        client.close()
    except Exception as exc:
        return f"no Docker engine answers ({type(exc).__name__}); start dockerd or run .ci/run"
    return None


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("gpu") is not None:
        why = _gpu_missing()
        if why:
            pytest.skip(why)
    if item.get_closest_marker("docker") is not None:
        why = _docker_missing()
        if why:
            if os.environ.get("ENVCHECK_REQUIRE_DOCKER") == "1":
                pytest.fail(f"docker test cannot run and ENVCHECK_REQUIRE_DOCKER=1: {why}")
            pytest.skip(why)
