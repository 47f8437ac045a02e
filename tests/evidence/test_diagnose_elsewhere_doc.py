"""docs/diagnose-elsewhere.md as written: its two blocks (`envcheck facts --bundle node7.json` on the node, `envcheck
explain node7.json` anywhere) run in a temp dir, and what the page says of the result holds: the same findings as a
live run, exit 1 when one failed, 2 for a file that is not a bundle, and a `--json` report that `envcheck fleet`
reads. Real: the CLI, the probes of this machine (no GPU: cuda.available fails, which is the finding to carry)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from tests.helpers import ROOT, run_cli

PAGE = (ROOT / "docs" / "diagnose-elsewhere.md").read_text()


def blocks() -> list[str]:
    return [b.strip() for b in re.findall(r"```bash\n(.*?)```", PAGE, flags=re.S)]


def envcheck(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`envcheck ARGS` in `cwd`, as the page's reader types it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "envcheck", *args]
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=180)


def test_the_pages_two_commands_run_as_written(tmp_path: Path) -> None:
    capture, replay = blocks()
    assert capture == "envcheck facts --bundle node7.json" and replay == "envcheck explain node7.json"
    made = envcheck(tmp_path, *shlex.split(capture)[1:])
    assert made.returncode == 0 and "envcheck explain node7.json" in made.stdout + made.stderr, made.stderr
    bundle = json.loads((tmp_path / "node7.json").read_text())
    assert bundle and "Traceback" not in made.stderr
    done = envcheck(tmp_path, *shlex.split(replay)[1:])
    # no GPU here: cuda.available fails in the bundle as it does live, and explain says so with the same exit code
    assert done.returncode == 1 and "cuda.available" in done.stdout, done.stdout[-2000:] + done.stderr
    allowed = envcheck(tmp_path, "explain", "--allow-cpu", "node7.json")
    assert allowed.returncode in (0, 1) and "allowed by --allow-cpu" in allowed.stdout
    report = envcheck(tmp_path, "explain", "node7.json", "--json", "-")
    (tmp_path / "fleet").mkdir()
    (tmp_path / "fleet" / "node7.json").write_text(report.stdout)
    fleet = run_cli("fleet", str(tmp_path / "fleet"), "--json", "-", timeout=120)
    assert json.loads(fleet.stdout)["read"]["nodes"] == 1, fleet.stderr
    (tmp_path / "not.json").write_text('{"kind": "something else"}')
    bad = envcheck(tmp_path, "explain", "not.json")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
