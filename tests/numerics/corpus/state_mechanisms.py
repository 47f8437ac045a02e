"""The module-state part of the fault corpus: normalization layers under their running-statistics options,
dropout and normalization on unbatched input, and DDP's handling of buffers; each mechanism cited, injected where the
original bug lived, with a training script whose outcome it changes. Appended to CORPUS (mechanisms.py).

DDP's ranks are forked from the process that runs the check or the script (envcheck.collectives.launch, and
_ddp_buffers_attempt here), so a patch made here is what the ranks run."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import tempfile
import time
import traceback
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F

from tests.numerics.corpus.injectors import patched
from tests.numerics.corpus.model import PT, Mechanism
from tests.numerics.corpus.scripts import flat

STEPS = 20
MODES, DDP = "modules.train_eval", "ddp.differential"


# --- injectors ------------------------------------------------------------------------------------------------------


def batchnorm_untracked_eval_uses_buffers() -> contextlib.AbstractContextManager[None]:
    """BatchNorm without running statistics normalizing its eval() input with fixed statistics (0 and 1) instead of the
    batch's own, the documented behaviour (the track_running_stats/eval decision pytorch#37823 asked for and
    pytorch#38084 fixed)."""
    from torch.nn.modules.batchnorm import _BatchNorm

    def make(orig: Any) -> Any:
        @functools.wraps(orig)
        def forward(self: Any, x: Any) -> Any:
            if self.training or self.track_running_stats:
                return orig(self, x)
            c = x.shape[1]
            zeros, ones = (f(c, device=x.device, dtype=x.dtype) for f in (torch.zeros, torch.ones))
            return F.batch_norm(x, zeros, ones, self.weight, self.bias, False, 0.0, self.eps)

        return forward

    return patched(_BatchNorm, "forward", make)


def instancenorm_unbatched_stats_dropped() -> contextlib.AbstractContextManager[None]:
    """InstanceNorm on an unbatched (C, *) input updating copies of its running statistics, not its own (the
    no-batch-dim path pytorch#65323 added: it must equal the module on a batch of one)."""
    from torch.nn.modules.instancenorm import _InstanceNorm

    def make(orig: Any) -> Any:
        @functools.wraps(orig)
        def handle(self: Any, x: Any) -> Any:
            saved = (self.running_mean, self.running_var)
            if saved[0] is not None:
                self.running_mean, self.running_var = saved[0].clone(), saved[1].clone()
            try:
                return orig(self, x)
            finally:
                self.running_mean, self.running_var = saved

        return handle

    return patched(_InstanceNorm, "_handle_no_batch_input", make)


def dropout3d_unbatched_as_batched() -> contextlib.AbstractContextManager[None]:
    """F.dropout3d taking an unbatched (C, D, H, W) input for a batch (N=C, C=D): depth slices dropped, not channels
    (pytorch#69885 added the no-batch-dim handling to Dropout2d/3d, after pytorch#69801)."""

    def make(orig: Any) -> Any:
        @functools.wraps(orig)
        def dropout3d(x: Any, p: float = 0.5, training: bool = True, inplace: bool = False) -> Any:
            if x.dim() != 4:
                return orig(x, p, training, inplace)
            return torch.feature_dropout(x, p, training)

        return dropout3d

    return patched(F, "dropout3d", make)


def ddp_buffers_frozen_at_construction() -> contextlib.AbstractContextManager[None]:
    """DDP broadcasting the buffer tensors it listed at construction, so a buffer replaced later (module.buf =
    new tensor, as BatchNorm's own code does) or registered later is never broadcast (pytorch#63916; pytorch#64472
    made DDP re-read the module's buffers before every broadcast)."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    def make(orig: Any) -> Any:
        @functools.wraps(orig)
        def assign(self: Any) -> None:
            if not hasattr(self, "modules_buffers"):
                orig(self)

        return assign

    return patched(DDP, "_assign_modules_buffers", make)


@contextlib.contextmanager
def ddp_init_sync_ignores_broadcast_buffers() -> Iterator[None]:
    """DDP's construction broadcasting rank 0's buffers with broadcast_buffers=False too (the behaviour before
    pytorch#100729, which made broadcast_buffers=False exclude them from the init sync, as documented)."""
    import torch.distributed.utils as dist_utils
    from torch.nn.parallel import distributed

    def make(orig: Any) -> Any:
        @functools.wraps(orig)
        def sync(*a: Any, **kw: Any) -> Any:
            kw["broadcast_buffers"] = True
            return orig(*a, **kw)

        return sync

    with patched(dist_utils, "_sync_module_states", make), patched(distributed, "_sync_module_states", make):
        yield


# --- scripts --------------------------------------------------------------------------------------------------------


def _data(n: int, d: int, out: int = 1, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g), torch.randn(n, out, generator=g)


def train_untracked_batchnorm() -> torch.Tensor:
    """An MLP with BatchNorm1d(track_running_stats=False) trained, then evaluated on a shifted batch."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8, track_running_stats=False), torch.nn.Linear(8, 1)
    )
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    for step in range(STEPS):
        x, y = _data(16, 4, seed=step)
        opt.zero_grad()
        F.mse_loss(net(x * 3 + 2), y).backward()
        opt.step()
    net.eval()
    with torch.no_grad():
        return net(_data(8, 4, seed=99)[0] * 3 + 2).reshape(-1)


def train_unbatched_instancenorm() -> torch.Tensor:
    """Sequences fed one at a time (C, L) through InstanceNorm1d(track_running_stats=True), then evaluated."""
    torch.manual_seed(0)
    norm, head = torch.nn.InstanceNorm1d(3, track_running_stats=True), torch.nn.Linear(9, 1)
    opt = torch.optim.SGD(head.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(1)
    for _ in range(STEPS):
        x, y = torch.randn(3, 9, generator=g) * 2 + 1, torch.randn(3, 1, generator=g)
        opt.zero_grad()
        F.mse_loss(head(norm(x)), y).backward()
        opt.step()
    norm.eval()
    with torch.no_grad():
        return head(norm(torch.randn(3, 9, generator=g) * 2 + 1)).reshape(-1)


def train_unbatched_dropout3d() -> torch.Tensor:
    """A volume (C, D, H, W) fed unbatched through Dropout3d and a linear head, trained with a fixed seed."""
    torch.manual_seed(0)
    drop, head = torch.nn.Dropout3d(0.5), torch.nn.Linear(4 * 2 * 3 * 3, 1)
    opt = torch.optim.SGD(head.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(4, 2, 3, 3, generator=g) + 2, torch.randn(1, generator=g)
    torch.manual_seed(5)
    for _ in range(STEPS):
        opt.zero_grad()
        F.mse_loss(head(drop(x).reshape(-1)), y).backward()
        opt.step()
    return flat(head)


def _ddp_buffers_rank(rank: int, world: int, store: str, out: str, change: str, broadcast: bool) -> None:
    import faulthandler
    import sys

    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    faulthandler.dump_traceback_later(30, exit=True, file=sys.stderr)  # a stuck rank says where, and ends
    torch.set_num_threads(1)
    dist.init_process_group("gloo", store=dist.FileStore(store, world), rank=rank, world_size=world)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.BatchNorm1d(6), torch.nn.Linear(6, 1))
    with torch.no_grad():
        model[1].running_mean.fill_(float(rank))  # each rank's own start: a broadcast shows
    ddp = DDP(model, broadcast_buffers=broadcast)
    if change == "replaced":
        model[1].running_mean = torch.full((6,), 3.0 * (rank + 1))  # a new tensor, as user code may assign
    x, y = _data(8, 4, seed=rank)
    for _ in range(3):
        F.mse_loss(ddp(x), y).backward()
        with torch.no_grad():
            for p in model.parameters():
                p.add_(p.grad, alpha=-0.05)
                p.grad = None
    model.eval()
    with torch.no_grad():
        torch.save(model(_data(4, 4, seed=9)[0]).reshape(-1), out)
    os._exit(0)  # no teardown (step_scripts._ddp_rank says why)


def train_ddp_buffers(change: str, broadcast: bool, world: int = 2, timeout_s: float = 45.0) -> torch.Tensor:
    """Two forked gloo ranks train a BatchNorm model under DDP; rank 1's eval output (its buffers at work)."""
    for _ in range(2):
        with tempfile.TemporaryDirectory(prefix="envcheck-corpus-ddp-") as tmp:
            outs = [os.path.join(tmp, f"rank{r}.pt") for r in range(world)]
            pids = []
            for rank in range(world):
                pid = os.fork()
                if pid == 0:  # a rank: never returns into pytest
                    code = 1
                    try:
                        _ddp_buffers_rank(
                            rank, world, os.path.join(tmp, "store"), outs[rank], change, broadcast
                        )
                        code = 0
                    except BaseException:
                        traceback.print_exc()
                    finally:
                        os._exit(code)
                pids.append(pid)
            codes = {}
            deadline = time.monotonic() + timeout_s
            while len(codes) < world and time.monotonic() < deadline:
                for pid in pids:
                    if pid not in codes and os.waitpid(pid, os.WNOHANG)[0]:
                        codes[pid] = 0
                time.sleep(0.05)
            for pid in pids:
                if pid not in codes:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
            if all(os.path.exists(o) for o in outs):
                result: torch.Tensor = torch.load(outs[1])
                return result
    raise RuntimeError(
        f"DDP buffer training ({change}, broadcast_buffers={broadcast}) did not finish (twice)"
    )


STATE_CORPUS: tuple[Mechanism, ...] = (
    Mechanism(
        "BatchNorm without running statistics evaluates with fixed statistics, not the batch's",
        f"{PT}/pull/38084",
        batchnorm_untracked_eval_uses_buffers,
        train_untracked_batchnorm,
        MODES,
    ),
    Mechanism(
        "InstanceNorm on unbatched input drops its running-statistics update",
        f"{PT}/pull/65323",
        instancenorm_unbatched_stats_dropped,
        train_unbatched_instancenorm,
        MODES,
    ),
    Mechanism(
        "Dropout3d on unbatched input drops depth slices instead of channels",
        f"{PT}/pull/69885",
        dropout3d_unbatched_as_batched,
        train_unbatched_dropout3d,
        MODES,
    ),
    Mechanism(
        "DDP never broadcasts a buffer replaced after construction",
        f"{PT}/issues/63916",
        ddp_buffers_frozen_at_construction,
        functools.partial(train_ddp_buffers, "replaced", True),
        DDP,
    ),
    Mechanism(
        "DDP broadcast_buffers=False still broadcasts buffers at construction",
        f"{PT}/pull/100729",
        ddp_init_sync_ignores_broadcast_buffers,
        functools.partial(train_ddp_buffers, "none", False),
        DDP,
    ),
)
