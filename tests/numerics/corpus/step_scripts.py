"""Ground-truth training scripts for the training-step mechanisms of the corpus: each trains a tiny model
the way a user would (DDP on two real gloo ranks, dropout and BatchNorm models, attention with masks, schedulers and
checkpoint resumes, embeddings, clipping, weight averaging, a compiled model) and returns what the training produced,
so a mechanism's harm is a changed outcome."""

from __future__ import annotations

import io
import os
import signal
import tempfile
import time
import traceback
from typing import Any

import torch
import torch.nn.functional as F

from tests.numerics.corpus.scripts import flat

STEPS = 20


def _data(n: int, d: int, out: int = 1, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g), torch.randn(n, out, generator=g)


def _ddp_rank(rank: int, world: int, store_path: str, out_path: str, hook: str, scale: float) -> None:
    import faulthandler
    import sys

    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP

    faulthandler.dump_traceback_later(30, exit=True, file=sys.stderr)  # a stuck rank says where, and ends
    torch.set_num_threads(1)
    dist.init_process_group("gloo", store=dist.FileStore(store_path, world), rank=rank, world_size=world)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    ddp = DDP(model)
    ddp.register_comm_hook(None, getattr(default_hooks, f"{hook}_hook"))
    x, y = _data(
        8, 6, 3
    )  # every rank the same shard: large gradients add up across ranks instead of cancelling
    for _ in range(STEPS):
        (F.mse_loss(ddp(x), y) * scale).backward()
        with torch.no_grad():
            for p in model.parameters():
                p.add_(p.grad, alpha=-0.05 / scale)
                p.grad = None
    torch.save(flat(model), out_path)
    # No teardown: freeing DDP and the gloo process group here sometimes never returned (a hung rank's stack sat
    # in _ddp_rank's return); the rank ends at once, as envcheck's own ranks do (collectives/rank.py).
    os._exit(0)


def train_ddp(hook: str, scale: float = 1.0, world: int = 2, timeout_s: float = 45.0) -> torch.Tensor:
    """Two forked gloo ranks train with DDP and a comm hook (the same shard on both); rank 0's final weights.
    A rank that fails or hangs is an error here, never an outcome (a NaN would pass for harm); one retry."""
    for _ in range(2):
        result = _ddp_attempt(hook, scale, world, timeout_s)
        if result is not None:
            return result
    raise RuntimeError(f"DDP training with hook {hook} did not finish on {world} ranks (twice): see stderr")


def _ddp_attempt(hook: str, scale: float, world: int, timeout_s: float) -> torch.Tensor | None:
    with tempfile.TemporaryDirectory(prefix="envcheck-corpus-ddp-") as tmp:
        outs = [os.path.join(tmp, f"rank{r}.pt") for r in range(world)]
        pids = []
        for rank in range(world):
            pid = os.fork()
            if pid == 0:  # a rank: never returns into pytest
                code = 1
                try:
                    _ddp_rank(rank, world, os.path.join(tmp, "store"), outs[rank], hook, scale)
                    code = 0
                except BaseException:
                    traceback.print_exc()  # the rank's reason, on the test's stderr
                finally:
                    os._exit(code)
            pids.append(pid)
        codes: dict[int, int] = {}
        deadline = time.monotonic() + timeout_s
        while len(codes) < len(pids) and time.monotonic() < deadline:
            for pid in pids:
                if pid not in codes:
                    done, status = os.waitpid(pid, os.WNOHANG)
                    if done:
                        codes[pid] = os.waitstatus_to_exitcode(status)
            time.sleep(0.05)
        for pid in pids:
            if pid not in codes:  # past the deadline: kill and reap the ranks we started
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                codes[pid] = -9
        if any(codes.values()) or not all(os.path.exists(o) for o in outs):
            return None
        result: torch.Tensor = torch.load(outs[0])
        return result


def train_dropout2d() -> torch.Tensor:
    """A conv net with Dropout2d, trained with a fixed seed."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(2, 6, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.Dropout2d(0.5),
        torch.nn.Flatten(),
        torch.nn.Linear(6 * 16, 1),
    )
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(16, 2, 4, 4, generator=g), torch.randn(16, 1, generator=g)
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    torch.manual_seed(5)
    for _ in range(STEPS):
        opt.zero_grad()
        F.mse_loss(net(x), y).backward()
        opt.step()
    return flat(net)


def train_batchnorm_cumulative() -> torch.Tensor:
    """An MLP with BatchNorm1d(momentum=None) trained on shifting batches, then evaluated (running statistics)."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8, momentum=None), torch.nn.Linear(8, 1)
    )
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    for step in range(STEPS):
        x, y = _data(16, 4, seed=step)
        opt.zero_grad()
        F.mse_loss(net(x + step * 0.2), y).backward()
        opt.step()
    net.eval()
    with torch.no_grad():
        return net(_data(8, 4, seed=99)[0]).reshape(-1)


def _attention_data() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(8, 6, 8, generator=g)
    pad = torch.zeros(8, 6, dtype=torch.bool)
    pad[:, 4:] = True  # the last two tokens of every sequence are padding
    return x, torch.randn(8, 8, generator=g), pad


def train_sdpa_padding() -> torch.Tensor:
    """Self-attention trained with a boolean attn_mask that hides padding keys."""
    torch.manual_seed(0)
    qkv, out = torch.nn.Linear(8, 24), torch.nn.Linear(8, 8)
    x, y, pad = _attention_data()
    opt = torch.optim.SGD([*qkv.parameters(), *out.parameters()], lr=0.1)
    for _ in range(STEPS):
        opt.zero_grad()
        q, k, v = qkv(x).chunk(3, -1)
        h = F.scaled_dot_product_attention(q, k, v, attn_mask=~pad[:, None, :].expand(8, 6, 6))
        F.mse_loss(out(h[:, 0]), y).backward()
        opt.step()
    return torch.cat([flat(qkv), flat(out)])


def train_mha_float_padding() -> torch.Tensor:
    """nn.MultiheadAttention trained with a float key_padding_mask (a soft bias against padding)."""
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    x, y, pad = _attention_data()
    soft = pad.float() * -2.0
    opt = torch.optim.SGD(mha.parameters(), lr=0.1)
    for _ in range(STEPS):
        opt.zero_grad()
        h, _ = mha(x, x, x, key_padding_mask=soft, need_weights=False)
        F.mse_loss(h[:, 0], y).backward()
        opt.step()
    return flat(mha)


def _sched_model() -> tuple[Any, Any, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    x, y = _data(32, 4)
    return model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), x, y


def train_sequential_constants() -> torch.Tensor:
    """SGD under SequentialLR([ConstantLR(0.5), ConstantLR(0.3)], milestones=[3])."""
    from torch.optim.lr_scheduler import ConstantLR, SequentialLR

    model, opt, x, y = _sched_model()
    sched = SequentialLR(opt, [ConstantLR(opt, 0.5, total_iters=3), ConstantLR(opt, 0.3, total_iters=4)], [3])
    for _ in range(10):
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        opt.step()
        sched.step()
    return flat(model)


def train_sequential_resumed() -> torch.Tensor:
    """Warm-up then cosine (SequentialLR), checkpointed at step 6 and resumed from the file."""
    from torch.optim.lr_scheduler import CosineAnnealingLR, LinearLR, SequentialLR

    def make(opt: Any) -> Any:
        return SequentialLR(opt, [LinearLR(opt, 0.1, total_iters=4), CosineAnnealingLR(opt, T_max=12)], [4])

    model, opt, x, y = _sched_model()
    sched = make(opt)
    for i in range(16):
        if i == 6:
            buf = io.BytesIO()
            torch.save({"m": model.state_dict(), "o": opt.state_dict(), "s": sched.state_dict()}, buf)
            buf.seek(0)
            state = torch.load(buf, weights_only=True)
            model, opt, _, _ = _sched_model()
            sched = make(opt)
            model.load_state_dict(state["m"])
            opt.load_state_dict(state["o"])
            sched.load_state_dict(state["s"])
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        opt.step()
        sched.step()
    return flat(model)


def train_bf16_adam_resumed(steps: int = 300, resume_at: int = 260) -> torch.Tensor:
    """A bfloat16 model trained with Adam, checkpointed late in training and resumed from the file."""

    def fresh() -> tuple[Any, Any]:
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 1).to(torch.bfloat16)
        return model, torch.optim.Adam(model.parameters(), lr=1e-3)

    model, opt = fresh()
    x, y = _data(32, 4)
    x, y = x.bfloat16(), y.bfloat16()
    for i in range(steps):
        if i == resume_at:
            buf = io.BytesIO()
            torch.save({"m": model.state_dict(), "o": opt.state_dict()}, buf)
            buf.seek(0)
            state = torch.load(buf, weights_only=True)
            model, opt = fresh()
            model.load_state_dict(state["m"])
            opt.load_state_dict(state["o"])
        opt.zero_grad()
        F.mse_loss(model(x).float(), y.float()).backward()
        opt.step()
    return flat(model).float()


def train_sparse_embedding() -> torch.Tensor:
    """Embedding(sparse=True, padding_idx=0) trained with SGD on padded sequences."""
    torch.manual_seed(0)
    emb, head = torch.nn.Embedding(10, 4, padding_idx=0, sparse=True), torch.nn.Linear(4, 1)
    g = torch.Generator().manual_seed(1)
    idx = torch.randint(0, 10, (16, 5), generator=g)
    idx[:, 3:] = 0
    y = torch.randn(16, 1, generator=g)
    opt = torch.optim.SGD([*emb.parameters(), *head.parameters()], lr=0.1)
    for _ in range(STEPS):
        opt.zero_grad()
        F.mse_loss(head(emb(idx).sum(1)), y).backward()
        opt.step()
    return flat(emb)


def train_embedding_bag_mean() -> torch.Tensor:
    """EmbeddingBag(mode='mean', padding_idx=0) over padded bags."""
    torch.manual_seed(0)
    bag, head = torch.nn.EmbeddingBag(10, 4, mode="mean", padding_idx=0), torch.nn.Linear(4, 1)
    g = torch.Generator().manual_seed(1)
    idx = torch.randint(1, 10, (16, 5), generator=g)
    idx[:, 3:] = 0
    y = torch.randn(16, 1, generator=g)
    opt = torch.optim.SGD([*bag.parameters(), *head.parameters()], lr=0.1)
    for _ in range(STEPS):
        opt.zero_grad()
        F.mse_loss(head(bag(idx)), y).backward()
        opt.step()
    return flat(bag)


def train_clip_skip_nonfinite() -> torch.Tensor:
    """A loop that clips with error_if_nonfinite=True and skips the step when a loss spike makes the norm inf."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    x, y = _data(32, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for i in range(STEPS):
        opt.zero_grad()
        (F.mse_loss(model(x), y) * (float("inf") if i == 5 else 1.0)).backward()
        try:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)
        except RuntimeError:
            continue  # the documented way to skip a non-finite step
        opt.step()
    return flat(model)


def train_clip_inf_norm() -> torch.Tensor:
    """Training with clip_grad_norm_(norm_type=inf, foreach=True)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    x, y = _data(32, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(STEPS):
        opt.zero_grad()
        (F.mse_loss(model(x), y) * 10).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.05, norm_type=float("inf"), foreach=True)
        opt.step()
    return flat(model)


def _averaging(avg_kw: dict[str, Any], use_buffers: bool) -> tuple[Any, Any]:
    from torch.optim import swa_utils

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 1))
    avg = swa_utils.AveragedModel(model, use_buffers=use_buffers, **avg_kw)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(STEPS):
        x, y = _data(16, 4, seed=step)
        opt.zero_grad()
        F.mse_loss(model(x + 0.3 * step), y).backward()
        opt.step()
        avg.update_parameters(model)
    return model, avg


def train_ema_buffers() -> torch.Tensor:
    """An AveragedModel (EMA, use_buffers=False) of a BatchNorm model, evaluated after training."""
    from torch.optim import swa_utils

    _, avg = _averaging({"multi_avg_fn": swa_utils.get_ema_multi_avg_fn(0.9)}, use_buffers=False)
    avg.eval()
    with torch.no_grad():
        return avg(_data(8, 4, seed=99)[0]).reshape(-1)


def train_ema_weights() -> torch.Tensor:
    """The EMA weights (decay 0.9) of a model trained 20 steps."""
    from torch.optim import swa_utils

    _, avg = _averaging({"multi_avg_fn": swa_utils.get_ema_multi_avg_fn(0.9)}, use_buffers=True)
    return flat(avg.module)


def train_compiled_attention() -> torch.Tensor:
    """A softmax attention model trained under torch.compile (Inductor's decompositions, no codegen)."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    qkv, out = torch.nn.Linear(8, 24), torch.nn.Linear(8, 8)
    x, y, _ = _attention_data()

    def loss_fn(x: torch.Tensor) -> torch.Tensor:
        q, k, v = qkv(x).chunk(3, -1)
        h = torch.softmax(q @ k.transpose(-2, -1) / 8**0.5, -1) @ v
        return F.mse_loss(out(h[:, 0]), y)

    compiled = torch.compile(loss_fn, backend="aot_eager_decomp_partition")
    opt = torch.optim.SGD([*qkv.parameters(), *out.parameters()], lr=0.1)
    for _ in range(10):
        opt.zero_grad()
        compiled(x).backward()
        opt.step()
    return torch.cat([flat(qkv), flat(out)])
