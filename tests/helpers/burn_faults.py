"""Faults for burn workers, read from ENVCHECK_TEST_FAULT by a burn hook (envcheck.burn.loop's ENVCHECK_BURN_HOOK
extension point, `BURN_HOOK` below), so none of it ships in the package. The hook is called as
hook(workload, worker, round, output) on every output, before the worker digests it.

Format: `worker=W:KIND[:ARG]`, several separated by `;`:
- `flip:RATE`   flip one random bit of one random element of W's output with probability RATE per output
                (a GPU that computes a wrong bit now and then);
- `stuck:BIT`   flip bit BIT of the first 4-byte word of every output of W (the same wrong bits every time: a
                persistent fault; bit 0 is a last-place error inside any tolerance, bit 30 an exponent bit far
                outside it);
- `exit`        W exits with code 3 at its first output (the burn's own failure, not the device's);
- `cgroup:DIR`  W moves itself into the cgroup DIR (its cgroup.procs) at its first output: the CPU quota the test
                set there throttles it from then on.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from typing import Any

ENV_VAR = "ENVCHECK_TEST_FAULT"
BURN_HOOK = f"{os.path.abspath(__file__)}:at_output"  # the value of ENVCHECK_BURN_HOOK that loads this module
EXIT_CODE = 3
KINDS = ("flip", "stuck", "exit", "cgroup")


@dataclass(frozen=True)
class Fault:
    """One worker's fault."""

    worker: int
    kind: str
    arg: str = ""


def parse(text: str | None) -> list[Fault]:
    """Parse ENVCHECK_TEST_FAULT; anything malformed raises ValueError."""
    faults = []
    for part in (text or "").split(";"):
        if not part.strip():
            continue
        head, _, rest = part.partition(":")
        key, _, value = head.partition("=")
        kind, _, arg = rest.partition(":")
        if key.strip() != "worker" or not value.strip().isdigit() or kind not in KINDS:
            raise ValueError(f"{ENV_VAR}={text!r}: give worker=N:{'|'.join(KINDS)}[:ARG]")
        faults.append(Fault(int(value), kind, arg))
    return faults


def env(*faults: str) -> dict[str, str]:
    """The environment that makes burn workers run these faults."""
    return {"ENVCHECK_BURN_HOOK": BURN_HOOK, ENV_VAR: ";".join(faults)}


_rng = random.Random()
_started: set[int] = set()


def at_output(workload: str, worker: int, rnd: int, output: Any) -> None:
    """The burn hook: apply this worker's faults to `output` in place."""
    import torch

    for fault in parse(os.environ.get(ENV_VAR)):
        if fault.worker != worker:
            continue
        first = worker not in _started
        _started.add(worker)
        flat = output.detach().reshape(-1).view(torch.uint8)
        if fault.kind == "flip" and _rng.random() < float(fault.arg):
            flat[_rng.randrange(flat.numel())] ^= 1 << _rng.randrange(8)
        elif fault.kind == "stuck" and flat.numel() >= 4:
            bit = int(fault.arg)
            flat[bit // 8] ^= 1 << (bit % 8)
        elif fault.kind == "exit" and first:
            os._exit(EXIT_CODE)
        elif fault.kind == "cgroup" and first:
            with open(os.path.join(fault.arg, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
