"""Hostile content and failing outputs end to end, with the real CLI in a subprocess: a broken pipe
or a full stdout is one line and exit 3 after every report was written; ESC/CSI/OSC and undecodable bytes from
the environment reach neither the terminal nor the JUnit/Prometheus files raw; one path given twice and bench's
bad inputs are refused at parse time (exit 2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import ROOT, run_cli

HOSTILE_IFNAME = b"eth\x1b[2J\x1b]8;;https://evil.example/\x07\x9b31m\xff"


def hostile_env() -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("NCCL_SOCKET_IFNAME", None)
    return env


def test_broken_pipe_writes_every_report_then_exit_3(tmp_path: Path) -> None:
    env = {k.encode(): v.encode() for k, v in hostile_env().items()}
    env[b"NCCL_SOCKET_IFNAME"] = HOSTILE_IFNAME
    cmd = [
        sys.executable,
        "-m",
        "envcheck",
        "run",
        "--allow-cpu",
        "--only",
        "net.ifname,cuda.available",
        "--json",
        "r.json",
        "--junit",
        "r.xml",
        "--prometheus",
        "r.prom",
    ]
    # `envcheck ... | true`: the reader is gone before the first line is written, so the first write of the table
    # meets EPIPE every time. (A reader that takes one line and then closes, `| head -1`, raced the writer: the
    # whole table fits in the pipe buffer, and CI once saw it written before the reader closed, exit 1.)
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            cmd, stdout=write_end, stderr=subprocess.PIPE, env=env, cwd=tmp_path, timeout=120
        )
    finally:
        os.close(write_end)
    err = done.stderr.decode()
    assert done.returncode == 3 and err.strip().count("\n") == 0 and "broken pipe" in err, err
    report = json.loads((tmp_path / "r.json").read_text())
    ifname = next(r for r in report["results"] if r["name"] == "net.ifname")
    assert ifname["status"] == "fail"  # the premise: the hostile value was read and judged
    assert "\\udcff" not in ifname["summary"] and "\udcff" in ifname["summary"]  # JSON: the exact value
    xml = (tmp_path / "r.xml").read_bytes()
    assert b"\x1b" not in xml and b"\\x1b[2J" in xml and b"\\xff" in xml
    ET.fromstring(xml)  # well-formed XML 1.0
    families = list(text_string_to_metric_families((tmp_path / "r.prom").read_text()))
    assert any(f.name == "envcheck_check_status" for f in families)


def test_the_terminal_table_shows_hostile_text_escaped(tmp_path: Path) -> None:
    env = {k.encode(): v.encode() for k, v in hostile_env().items()}
    env[b"NCCL_SOCKET_IFNAME"] = HOSTILE_IFNAME
    done = subprocess.run(
        [sys.executable, "-m", "envcheck", "run", "--allow-cpu", "--only", "net.ifname"],
        capture_output=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr  # the premise: the hostile value was read and judged
    text = done.stdout.decode()  # C0 and C1 controls, as characters (0x9b is also a UTF-8 continuation byte)
    assert not [c for c in text if (ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) < 0xA0]
    assert b"\\x1b[2J" in done.stdout  # shown, escaped, so the user sees what was set


def test_full_stdout_still_writes_the_report(tmp_path: Path) -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "envcheck",
                "run",
                "--allow-cpu",
                "--only",
                "net.ifname",
                "--json",
                str(tmp_path / "r.json"),
            ],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            env=hostile_env(),
            timeout=120,
            cwd=tmp_path,
        )
    assert done.returncode == 3 and len(done.stderr.splitlines()) == 1 and "No space left" in done.stderr
    assert json.loads((tmp_path / "r.json").read_text())["results"][0]["name"] == "net.ifname"


def test_one_path_twice_is_refused_at_parse_time(tmp_path: Path) -> None:
    path = str(tmp_path / "P")
    done = run_cli("run", "--json", path, "--junit", path, timeout=60)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1 and "--json and --junit" in done.stderr
    assert not os.path.exists(path)


def test_ascii_terminal_lists_checks_without_a_traceback() -> None:
    done = run_cli("list", env={**os.environ, "PYTHONIOENCODING": "ascii"}, timeout=60)
    assert done.returncode == 0 and "Traceback" not in done.stderr and "cuda.available" in done.stdout


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--cpu-threads", "99999999999999999999"), "--cpu-threads"),
        (("--only", ""), "--only"),
        (("--baseline", "FIFO"), "not a regular file"),
    ],
)
def test_bench_inputs_follow_runs_rules(tmp_path: Path, args: tuple[str, ...], says: str) -> None:
    fifo = tmp_path / "FIFO"
    os.mkfifo(fifo)
    args = tuple(str(fifo) if a == "FIFO" else a for a in args)
    done = run_cli(
        "bench", "--allow-cpu", *args, timeout=30
    )  # a FIFO would block: the timeout proves it did not
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1 and says in done.stderr, done.stderr
