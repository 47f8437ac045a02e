"""A check's verdict does not depend on what ran before it in its worker.

Real: the engine, one worker holding every isolated check of the full level (tests/checks/order_driver.py), real
torch, real compiles, real gloo ranks; in the hardened shape, the kernel's read-only bind mounts of the temp dirs and
HOME and a uid without a passwd entry (tests/hardened/staging). Staged: nothing; no GPU is used (CUDA hidden). The
orders: the registry's and its reverse; each check's status and code must be the same in both. The reverse puts every
pair of checks the other way round, and gives each check, as what ran before it, exactly the checks that did not run
before it in registry order: a verdict that depends on whether any one other check ran first differs between the two.
(A shuffle as a third order, dropped to save a full level's time, could only add dependencies on two or more checks
at once.)
The hardened run used to end modules.train_eval in ERROR after ops.opdb had frozen torch.backends' flags, and
train.state_roundtrip passed or warned by what ran before it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.hardened.staging import UID, Hardening, can_stage, run
from tests.helpers import ROOT, no_gpu_env

# long: a full level per order; `make test` runs these in its `long` stream
pytestmark = [pytest.mark.slow, pytest.mark.long]
ORDERS = ("registry", "reversed")


def differences(by_order: dict[str, dict[str, list[str | None]]]) -> dict[str, dict[str, list[str | None]]]:
    """The checks whose verdict differs between orders, with their verdict in each."""
    first = next(iter(by_order.values()))
    return {
        name: {order: got.get(name) for order, got in by_order.items()}
        for name in first
        if len({json.dumps(got.get(name)) for got in by_order.values()}) > 1
    }


def test_every_full_level_check_gives_the_same_verdict_in_any_order(full_level_compile_cache: Path) -> None:
    # one compile cache for every order (compiles are then warm after the first; the verdicts must not care)
    env = {**no_gpu_env(), "PYTHONPATH": str(ROOT), "TORCHINDUCTOR_CACHE_DIR": str(full_level_compile_cache)}
    by_order = {}
    for order in ORDERS:
        done = subprocess.run(
            [sys.executable, "-m", "tests.checks.order_driver", order],
            capture_output=True,
            text=True,
            timeout=900,
            cwd=ROOT,
            env=env,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        by_order[order] = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(by_order["registry"]) >= 50
    assert not differences(by_order)
    assert not [n for n, (status, _) in by_order["registry"].items() if status == "error"]


@pytest.mark.skipif(not can_stage(), reason="needs root with util-linux unshare/setpriv/prlimit")
def test_the_hardened_shape_gives_the_same_verdicts_in_any_order() -> None:
    """Read-only temp dirs and HOME, and a uid without a passwd entry: what the checks that need them say is the
    environment's finding, the same in every order, and nothing crashes (the ERROR of the hardened proof)."""
    home = os.path.expanduser("~")
    hardened = Hardening(
        readonly=("/tmp", "/var/tmp", home),
        uid=UID,
        env={**no_gpu_env(), "HOME": home, "PYTHONPATH": str(ROOT)},
    )
    by_order = {}
    for order in ORDERS:
        done = run(hardened, [sys.executable, "-m", "tests.checks.order_driver", order], timeout_s=900)
        assert done.returncode == 0, done.stderr[-3000:]
        by_order[order] = json.loads(done.stdout.strip().splitlines()[-1])
    assert not differences(by_order)
    verdicts = by_order["registry"]
    assert verdicts["modules.train_eval"][0] != "error" and verdicts["ops.opdb"][0] != "error"
    assert not [n for n, (status, _) in verdicts.items() if status == "error"], verdicts
