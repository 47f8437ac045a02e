"""What `envcheck run` leaves behind when SIGTERM/SIGHUP/SIGINT reaches it at random moments (and after clean runs).

Each delivery runs the real CLI in a private TMPDIR (so nothing else on the machine counts), signals it after a
random delay, then waits for its processes to go and lists what is left in that TMPDIR and which processes still
carry the run's marker. Prints one line per delivery and a summary: how many deliveries left what.

    python bench/signal_leftovers.py [--deliveries 27] [--clean 2] [--only a,b] [--max-delay 40] [--seed 0]
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHECKS = "container.limits,train.resume,compile.inductor,train.checkpointing"
PATTERNS = ("pymp-*", "envcheck-*", "torchinductor_*", "torchelastic_*", "tmp*")


def _marked(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if marker.encode() in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def leftovers(tmp: Path) -> list[str]:
    """The names left in `tmp` that match a temp-dir pattern."""
    return sorted({p.name for pattern in PATTERNS for p in tmp.glob(pattern)})


def _sigint_default() -> None:
    """A job started in the background inherits SIGINT ignored (and Python then installs no handler): undo that."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def one(
    only: str, sig: signal.Signals | None, delay: float, timeout: float
) -> tuple[int | None, list[str], int, float]:
    """One run: (exit code, leftovers, processes left, seconds). `sig` None: a clean run to its end. A run that
    ended before `delay` gets no signal: its exit code is 0 or 1 and it counts as a clean run."""
    tmp = Path(tempfile.mkdtemp(prefix="sigleft-"))
    marker = f"envcheck-sigleft-{uuid.uuid4().hex}"
    env = {**os.environ, "TMPDIR": str(tmp), "ENVCHECK_TEST_MARKER": marker}
    env.pop("TORCHINDUCTOR_CACHE_DIR", None)
    start = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "envcheck", "run", "--level", "full", "--allow-cpu", "--only", only],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=_sigint_default,
    )
    try:
        if sig is not None:
            try:
                proc.wait(timeout=delay)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, sig)
        code = proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    end = time.monotonic() + 10
    while _marked(marker) and time.monotonic() < end:
        time.sleep(0.1)
    time.sleep(0.5)  # a dying DataLoader worker's last write would show up now
    left, procs = leftovers(tmp), _marked(marker)
    for pid in procs:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    shutil.rmtree(tmp, ignore_errors=True)
    return code, left, len(procs), time.monotonic() - start


def main() -> int:
    """Deliver the signals and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deliveries", type=int, default=27)
    parser.add_argument("--clean", type=int, default=2, help="clean runs (no signal) first")
    parser.add_argument("--only", default=CHECKS)
    parser.add_argument("--max-delay", type=float, default=40.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    kinds: collections.Counter[str] = collections.Counter()
    dirty = 0
    for n in range(args.clean):
        code, left, procs, took = one(args.only, None, 0, 600)
        print(f"clean {n}: exit {code}, {took:.1f}s, left {left or 'nothing'}, processes {procs}", flush=True)
        dirty += bool(left or procs)
        kinds.update(_kind(x) for x in left)
    for n in range(args.deliveries):
        sig = rng.choice([signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
        delay = rng.uniform(0.5, args.max_delay)
        code, left, procs, took = one(args.only, sig, delay, 60)
        when = f"at {delay:5.1f}s" if code not in (0, 1) else f"after its end ({took:4.1f}s < {delay:4.1f}s)"
        print(
            f"{n:2d} {sig.name:7s} {when}: exit {code}, left {left or 'nothing'}, processes {procs}",
            flush=True,
        )
        dirty += bool(left or procs)
        kinds.update(_kind(x) for x in left)
        kinds.update({"process": procs} if procs else {})
    print(
        f"runs that left something: {dirty} of {args.clean + args.deliveries}; by kind: {dict(kinds) or 'none'}"
    )
    return 0


def _kind(name: str) -> str:
    for pattern in PATTERNS:
        if name.startswith(pattern.rstrip("*")):
            return pattern
    return name


if __name__ == "__main__":
    sys.exit(main())
