"""A stand-in `dcgmi` (DCGM cannot run here): a shell script on PATH that records its arguments and answers each
command line with the output and exit status a test gives it (DCGM's own texts and exit codes, cited where the test
builds them), or hangs as a host engine that does not answer does. The checks run it as they run the real binary."""

from __future__ import annotations

import re
from pathlib import Path

HANG = "hang"  # an answer: the command never returns (a hung nv-hostengine)


def _key(args: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "_", args)


def install(bin_dir: Path, answers: dict[str, tuple[int, str] | str]) -> Path:
    """Write `dcgmi` into bin_dir answering `answers` (command line after "dcgmi" -> (exit status, output), or
    HANG); an unlisted command line prints an error and exits 1. Returns the file of recorded calls."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    folder = bin_dir / "dcgmi-answers"
    folder.mkdir(exist_ok=True)
    for args, answer in answers.items():
        if answer == HANG:
            (folder / f"{_key(args)}.hang").write_text("")
        else:
            rc, out = answer
            (folder / f"{_key(args)}.out").write_text(out)
            (folder / f"{_key(args)}.rc").write_text(str(rc))
    calls = bin_dir / "dcgmi.calls"
    script = bin_dir / "dcgmi"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> "{calls}"\n'
        "key=$(printf '%s' \"$*\" | tr -c 'A-Za-z0-9' '_')\n"
        f'a="{folder}/$key"\n'
        '[ -f "$a.hang" ] && exec sleep 60\n'
        'if [ -f "$a.out" ]; then cat "$a.out"; exit "$(cat "$a.rc")"; fi\n'
        'echo "stand-in dcgmi: no answer for: $*"\n'
        "exit 1\n"
    )
    script.chmod(0o755)
    return calls


def calls(bin_dir: Path) -> list[str]:
    """The command lines dcgmi was run with, in order."""
    path = bin_dir / "dcgmi.calls"
    return path.read_text().splitlines() if path.exists() else []
