"""container.*: a real tiny /dev/shm (a private mount namespace) must be reported."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import subprocess
import sys

import pytest

from envcheck.core.result import Status
from tests.helpers import ROOT, run_check


def test_healthy_shm_and_dataloader_pass_here() -> None:
    assert run_check("container.shm", isolated=False).status is Status.PASS
    assert run_check("container.limits").status is Status.PASS


def _run_in_tiny_shm(size: str) -> subprocess.CompletedProcess[str]:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare to mount a private tiny /dev/shm")
    probe = subprocess.run(["unshare", "--mount", "true"], capture_output=True, timeout=10)
    if probe.returncode != 0:
        pytest.skip(f"mount namespaces unavailable here: {probe.stderr.decode().strip()}")
    inner = (
        f"mount -t tmpfs -o size={size} tmpfs /dev/shm && exec {sys.executable} -m envcheck run "
        "--only container.shm,container.limits --allow-cpu --json -"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", inner],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        cwd=ROOT,
    )


def test_tiny_shm_warns_and_the_dataloader_failure_is_reported() -> None:
    done = _run_in_tiny_shm("1m")
    results = {r["name"]: r for r in json.loads(done.stdout)["results"]}
    shm, limits = results["container.shm"], results["container.limits"]
    assert shm["status"] == "warn" and shm["measured"]["shm_mib"] == 1
    assert "--ipc=host" in shm["remediation"] and "--shm-size=8g" in shm["remediation"]
    assert limits["status"] == "fail", limits
    assert "DataLoader" in limits["summary"] and "/dev/shm is only 1 MiB" in limits["summary"]
    # forked workers inherit torch: the lost first batch is judged on the per-batch bound (spawned ones: 45 s)
    bound = 15 if multiprocessing.get_start_method() == "fork" else 45
    assert f"within the {bound}s start-up bound" in limits["summary"], limits["summary"]
    assert "--ipc=host" in limits["remediation"]
    assert shm["fault_class"] == limits["fault_class"] == "config"  # how the container was started
    assert done.returncode == 1


def test_low_memlock_with_several_gpus_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mocked: two visible GPUs (none exist here), Docker's default 64 KiB memlock, and the DataLoader
    result (a real one would try to pin memory on the fake GPUs); the memlock rule itself runs for real."""
    import resource

    import torch

    from envcheck.checks import container

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(container, "dataloader_runs", lambda ctx: (True, "", {"batches": 8}))
    monkeypatch.setattr(resource, "getrlimit", lambda res: (64 * 1024, 64 * 1024))
    result = run_check("container.limits", isolated=False)
    assert result.status is Status.WARN, result
    assert "memlock ulimit is 64 KiB with 2 GPUs" in result.summary
    assert result.remediation and "--ulimit memlock=-1" in result.remediation
    assert result.fault_class == "config"
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert run_check("container.limits", isolated=False).status is Status.PASS


class _SlowItem:
    """8 small batches; item `slow` takes `delay` seconds (a stalled delivery)."""

    def __init__(self, slow: int = -1, delay: float = 0.0) -> None:
        self.slow, self.delay = slow, delay

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> object:
        import time

        import torch

        if i == self.slow:
            time.sleep(self.delay)
        return torch.full((4,), float(i))


def _slow_start(worker_id: int) -> None:
    import time

    time.sleep(2.0)  # a worker that takes longer to start than one batch may take to arrive


def test_dataloader_startup_has_its_own_bound_and_both_phases_are_reported() -> None:
    from envcheck.checks.container import dataloader_runs
    from tests.helpers import make_context

    ok, problem, measured = dataloader_runs(
        make_context(),
        dataset=_SlowItem(),
        startup_timeout_s=30,
        batch_timeout_s=1,
        worker_init_fn=_slow_start,
    )
    assert ok, problem
    assert measured["startup_s"] >= 2.0 and "delivery_s" in measured and measured["batches"] == 8


def test_a_stalled_delivery_is_told_apart_from_start_up() -> None:
    from envcheck.checks.container import dataloader_runs
    from tests.helpers import make_context

    ok, problem, measured = dataloader_runs(
        make_context(), dataset=_SlowItem(slow=6, delay=5), startup_timeout_s=30, batch_timeout_s=1
    )
    assert not ok and measured["failed_in"] == "delivery"
    assert "delivery stalled after" in problem and "bound 1s per batch" in problem


def test_dataloader_uses_the_start_method_a_users_job_gets_even_after_cuda_init(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In the check's worker CUDA is already up (cuda.* ran first). A user's job in that state still forks its
    DataLoader workers (the platform default), so the check must too; spawning tested another path and cost
    a torch import per worker (6 s on the H100 proof host). CUDA init is simulated: no GPU here."""
    import multiprocessing

    import torch

    from envcheck.checks.container import dataloader_runs
    from envcheck.core.check import Context

    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    ok, problem, measured = dataloader_runs(Context(allow_cpu=True))
    assert ok, problem
    assert measured["start"] == multiprocessing.get_start_method()
    # forked workers inherit torch: the per-batch bound (Python 3.14's default, forkserver: 45 s)
    assert measured["startup_bound_s"] == (15 if measured["start"] == "fork" else 45)


def test_spawned_workers_get_the_longer_start_up_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the start method is not fork (Python 3.14 on Linux: forkserver), each worker imports torch before its
    first batch: the bound is 45 s. Stand-in: a DataLoader whose iterator times out at once (real workers would
    import torch twice for a number); the fork path runs for real above."""
    import torch.utils.data

    from envcheck.checks import container
    from tests.helpers import make_context

    class TimesOut:
        def __init__(self, *args: object, **kwargs: object) -> None:
            self.timeout = kwargs["timeout"]

        def __iter__(self) -> TimesOut:
            return self

        def __next__(self) -> object:
            raise RuntimeError(f"DataLoader timed out after {self.timeout:g} seconds")

    monkeypatch.setattr(container.multiprocessing, "get_start_method", lambda: "forkserver")
    monkeypatch.setattr(torch.utils.data, "DataLoader", TimesOut)
    ok, problem, measured = container.dataloader_runs(make_context())
    assert not ok and measured["start"] == "forkserver" and measured["startup_bound_s"] == 45
    assert "within the 45s start-up bound: RuntimeError: DataLoader timed out after 45 seconds" in problem
