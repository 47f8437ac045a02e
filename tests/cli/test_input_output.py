"""Every input and every output path gives one clear line, a non-zero exit, nothing left behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envcheck.app import args, output
from tests.helpers import ROOT, request_of, run_cli

CPU_SAFE = "container.shm,container.limits"


def _one_line(done: subprocess.CompletedProcess[str], code: int = 2) -> str:
    assert done.returncode == code, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.mark.parametrize(
    "args, needle",
    [
        (["run", "--timeout", "nan"], "not a finite number"),
        (["run", "--timeout", "inf"], "not a finite number"),
        (["run", "--min-busbw", "nan"], "not a finite number"),
        (["run", "--min-busbw=-inf"], "not a finite number"),
        (["run", "--memory-fraction", "nan"], "not a finite number"),
        (["run", "--memory-fraction", "1.5"], "at most 1"),
        (["run", "--memory-fraction", "0"], "above 0"),
        (["run", "--cpu-ranks", "0"], "at least 2 ranks"),
        (["run", "--cpu-ranks", "1000"], "at most 64; each rank is a process"),
        (["run", "--expect-gpus", "\u0661"], "not a whole number"),
        (["run", "--only", ""], "names no check"),
        (["run", "--only", ","], "names no check"),
        (["run", "--skip", " , "], "names no check"),
        (["run", "--json", "-", "--junit", "-"], "--json and --junit both write to stdout"),
        (["facts", "--timeout", "nan"], "not a finite number"),
        (["bench", "--threshold", "nan"], "not a finite number"),
        (["bench", "--timeout", "inf"], "not a finite number"),
        (["bench", "--cpu-ranks", "1000"], "at most 64"),
        (["bench", "--json", "/nonexistent-dir/b.json"], "folder /nonexistent-dir does not exist"),
        (["bench", "--plots", "/etc/hostname/plots"], "/etc/hostname is not a folder"),
        (["run", "--json", "/dev/null/x.json"], "Not a directory"),
        (["image", "verify", "img:tag", "--timeout", "nan"], "not a finite number"),
        (["matrix", "verify", "--timeout", "inf"], "not a finite number"),
        (
            ["image", "verify", "img:tag", "--json", "/nonexistent-dir/r.json"],
            "folder /nonexistent-dir does not exist",
        ),
        (["image", "verify", "img:tag", "--only", ""], "names no check"),
        (["host", "--json", "/nonexistent-dir/h.json"], "folder /nonexistent-dir does not exist"),
    ],
)
def test_bad_numbers_names_and_consumers_are_one_line_exit_2(args: list[str], needle: str) -> None:
    done = run_cli(*args)
    assert needle in _one_line(done), done.stderr
    assert done.stdout == ""


def test_torchrun_entry_refuses_non_finite_numbers() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "envcheck.distributed", "--min-busbw", "nan"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "not a finite number" in _one_line(done)


def test_a_usage_error_leaves_no_output_file_behind(tmp_path: Path) -> None:
    target = tmp_path / "r.json"
    done = run_cli("run", "--json", str(target), "--level", "deep")
    _one_line(done)
    assert not target.exists()


@pytest.mark.parametrize("name", ["r.json/", "x" * 300 + ".json"])
def test_trailing_slash_or_long_name_is_one_line(tmp_path: Path, name: str) -> None:
    done = run_cli("run", "--json", f"{tmp_path}/{name}")
    assert "not a file path" in _one_line(done) or "longer than 255 bytes" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    done = run_cli("run", "--json", str(fifo), timeout=30)  # today: blocks in open() while parsing
    assert "not a regular file" in _one_line(done)


def test_validation_creates_nothing(tmp_path: Path) -> None:
    assert args.output_path(str(tmp_path / "r.json")) == str(tmp_path / "r.json")
    assert list(tmp_path.iterdir()) == []


def test_junit_on_stdout_keeps_stdout_pure() -> None:
    import xml.etree.ElementTree as ET

    done = run_cli("run", "--only", CPU_SAFE, "--allow-cpu", "--junit", "-")
    assert done.returncode == 0, done.stderr
    ET.fromstring(done.stdout)  # the table went to stderr, not into the XML
    assert "container.shm" in done.stderr


def test_write_is_atomic_and_a_failure_leaves_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "r.json"
    target.write_text("old report")
    real_fdopen = os.fdopen

    class Full:
        def __init__(self, fh: object) -> None:
            self.fh = fh

        def __enter__(self) -> Full:
            return self

        def __exit__(self, *exc: object) -> None:
            self.fh.close()  # type: ignore[attr-defined]

        def write(self, text: str) -> None:
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fdopen", lambda fd, *a, **k: Full(real_fdopen(fd, *a, **k)))
    with pytest.raises(output.WriteError, match="No space left on device"):
        output.write_output(str(target), "new report")
    assert target.read_text() == "old report"  # never half a report
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temp file left


def test_a_directory_in_the_way_is_one_line_and_the_table_is_kept(tmp_path: Path) -> None:
    target = tmp_path / "r.json"
    code = """
import os, sys
from envcheck.app import output
from envcheck.app.guard import guard
path = sys.argv[1]
def call():
    os.mkdir(path)  # appears after validation, before the write
    print("TABLE")
    output.write_output(path, "{}")
    return 0
sys.exit(guard(call))
"""
    done = subprocess.run(
        [sys.executable, "-c", code, str(target)], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert f"cannot write {target}" in _one_line(done, 3)
    assert done.stdout == "TABLE\n"


def _shell(command: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        ["bash", "-c", command], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env
    )


def test_json_to_a_full_stdout_is_one_line() -> None:
    done = _shell(f"{sys.executable} -m envcheck run --only {CPU_SAFE} --allow-cpu --json - >/dev/full")
    assert "No space left on device" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 3 and "container.shm" in done.stderr  # the table (on stderr) is there


def test_json_to_a_closed_stdout_is_one_line() -> None:
    done = _shell(f"{sys.executable} -m envcheck run --only {CPU_SAFE} --allow-cpu --json - >&-")
    assert "stdout is closed" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 3 and "container.shm" in done.stderr


def test_json_to_a_reader_that_exits_is_one_line() -> None:
    # `true` exits at once, long before the checks finish: the report meets a pipe without a reader (EPIPE).
    done = _shell(
        f"{sys.executable} -m envcheck run --only {CPU_SAFE} --allow-cpu --json - 2>err | true; "
        "echo ${PIPESTATUS[0]}; cat err; rm -f err"
    )
    assert "Traceback" not in done.stdout and "Exception ignored" not in done.stdout, done.stdout
    first, *rest = done.stdout.splitlines()
    assert first == "3", done.stdout
    assert any("broken pipe" in line for line in rest) and any("container.shm" in line for line in rest)


def test_write_output_broken_pipe_is_a_write_error(monkeypatch: pytest.MonkeyPatch) -> None:
    class Gone:
        def write(self, text: str) -> None:
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self) -> None:
            pass

    monkeypatch.setattr(sys, "stdout", Gone())
    monkeypatch.setattr(output, "stdout_gone", lambda: None)
    with pytest.raises(output.WriteError, match="broken pipe"):
        output.write_output("-", "{}")


def test_facts_that_collected_nothing_exit_non_zero(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from envcheck.app import commands
    from envcheck.core import runner
    from envcheck.core.errors import FatalError

    class DeadRunner:
        def __init__(self, *a: object, **k: object) -> None:
            pass

        def __enter__(self) -> DeadRunner:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def facts(self) -> dict[str, object]:
            return {"error": {"absent": "facts could not be collected: the worker was killed by SIGKILL"}}

    monkeypatch.setattr(runner, "Runner", DeadRunner)  # what cmd_facts imports when it runs
    request = request_of("facts", "--json", "-", "--timeout", "5")
    with pytest.raises(FatalError, match="killed by SIGKILL") as info:
        commands.cmd_facts(request)
    assert info.value.exit_code == 1
    assert json.loads(capsys.readouterr().out)["error"]  # the record is still written


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--json", "/nonexistent-dir/x.json"], "folder /nonexistent-dir does not exist"),
        (["--json", "-", "--junit", "-"], "--json and --junit both write to stdout"),
    ],
)
def test_torchrun_entry_rank_0_judges_its_report_paths_before_any_work(args: list[str], needle: str) -> None:
    """Rank 0 (the writer) refuses a report path it could not write before any collective starts; the other
    ranks never judge them (another node need not have the folder)."""
    env = {
        **os.environ,
        "RANK": "0",
        "LOCAL_RANK": "0",
        "WORLD_SIZE": "1",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "29599",
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run(
        [sys.executable, "-m", "envcheck.distributed", "--allow-cpu", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 2 and needle in _one_line(done), done.stderr
