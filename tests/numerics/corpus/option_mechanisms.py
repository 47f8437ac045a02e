"""The option-class part of the fault corpus: state changed on a live module (modules.train_eval), the structure of
random draws (dropout.structure) and options that interact (losses.reference); each mechanism cited, injected where
the original bug lived (option_injectors.py), with a training script whose outcome it changes. Appended to CORPUS
(mechanisms.py)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tests.numerics.corpus import option_injectors as inj
from tests.numerics.corpus.model import PT, Mechanism
from tests.numerics.corpus.scripts import flat

STEPS = 20
MODES, DRAWS, LOSSES = "modules.train_eval", "dropout.structure", "losses.reference"


def _regression(n: int, d: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g), torch.randn(n, 1, generator=g)


def train_frozen_batchnorm() -> torch.Tensor:
    """Pretrain an MLP with BatchNorm, then fine-tune on shifted data with its statistics frozen the documented way
    (track_running_stats turned off on the live module); evaluate."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    for step in range(2 * STEPS):
        if step == STEPS:
            net[1].track_running_stats = False  # freeze the statistics for fine-tuning
        x, y = _regression(16, 4, step)
        opt.zero_grad()
        F.mse_loss(net(x * (1 if step < STEPS else 3) + (0 if step < STEPS else 2)), y).backward()
        opt.step()
    net.eval()
    with torch.no_grad():
        return net(_regression(8, 4, 99)[0]).reshape(-1)


def train_cumulative_batchnorm_resumed() -> torch.Tensor:
    """BatchNorm(momentum=None) trained, given pretrained weights from a plain dict (strict=False) mid-run, trained on;
    evaluated with its cumulative running statistics."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8, momentum=None), torch.nn.Linear(8, 1)
    )
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    for step in range(STEPS):
        if step == STEPS // 2:
            weights = {k: v.clone() for k, v in net.state_dict().items() if k.endswith(("weight", "bias"))}
            net.load_state_dict(weights, strict=False)  # e.g. weights exported without buffers
        x, y = _regression(16, 4, step)
        opt.zero_grad()
        F.mse_loss(net(x * 2 + 1), y).backward()
        opt.step()
    net.eval()
    with torch.no_grad():
        return net(_regression(8, 4, 99)[0]).reshape(-1)


def train_channel_dropout_sequences() -> torch.Tensor:
    """A Conv1d model over (N, C, L) sequences with Dropout2d between layers (the 1-D channel dropout users wrote
    before Dropout1d existed), trained with a fixed seed."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv1d(3, 8, 3), torch.nn.Dropout2d(0.5), torch.nn.Conv1d(8, 1, 3))
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(8, 3, 12, generator=g), torch.randn(8, 1, 8, generator=g)
    torch.manual_seed(5)
    for _ in range(STEPS):
        opt.zero_grad()
        F.mse_loss(net(x), y).backward()
        opt.step()
    return flat(net)


def train_attention_dropout() -> torch.Tensor:
    """A one-layer self-attention regressor with dropout_p on its scaled_dot_product_attention, trained."""
    torch.manual_seed(0)
    proj, head = torch.nn.Linear(8, 24), torch.nn.Linear(8, 1)
    opt = torch.optim.SGD([*proj.parameters(), *head.parameters()], lr=0.05)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(4, 8, 8, generator=g), torch.randn(4, 8, 1, generator=g)
    torch.manual_seed(5)
    for _ in range(STEPS):
        q, k, v = proj(x).reshape(4, 8, 3, 2, 4).permute(2, 0, 3, 1, 4)  # (3, batch, heads, seq, dim)
        out = F.scaled_dot_product_attention(q, k, v, dropout_p=0.3).transpose(1, 2).reshape(4, 8, 8)
        opt.zero_grad()
        F.mse_loss(head(out), y).backward()
        opt.step()
    return torch.cat([flat(proj), flat(head)])


def train_stacked_lstm() -> torch.Tensor:
    """A two-layer LSTM with dropout between its layers, trained on a regression target with a fixed seed."""
    torch.manual_seed(0)
    lstm, head = torch.nn.LSTM(4, 8, num_layers=2, dropout=0.5), torch.nn.Linear(8, 1)
    opt = torch.optim.SGD([*lstm.parameters(), *head.parameters()], lr=0.1)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(6, 5, 4, generator=g), torch.randn(6, 5, 1, generator=g)
    torch.manual_seed(5)
    for _ in range(STEPS):
        opt.zero_grad()
        F.mse_loss(head(lstm(x)[0]), y).backward()
        opt.step()
    return torch.cat([flat(lstm), flat(head)])


def train_smoothed_tagger() -> torch.Tensor:
    """A token classifier with class weights, label smoothing and its padding class (0) as ignore_index."""
    torch.manual_seed(0)
    net = torch.nn.Linear(6, 5)
    opt = torch.optim.SGD(net.parameters(), lr=0.5)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(32, 6, generator=g), torch.randint(1, 5, (32,), generator=g)
    y[::3] = 0  # padding tokens
    w = torch.tensor([1.0, 2.0, 0.5, 1.0, 3.0])
    for _ in range(STEPS):
        opt.zero_grad()
        F.cross_entropy(net(x), y, weight=w, ignore_index=0, label_smoothing=0.1).backward()
        opt.step()
    return flat(net)


def train_l1_fit_with_exact_hits() -> torch.Tensor:
    """A box-regression head trained with smooth_l1_loss(beta=0) (plain L1, as detection configs set it) on targets
    some of which it already predicts exactly (a zero-initialized head and zero targets)."""
    torch.manual_seed(0)
    net = torch.nn.Linear(4, 3)
    with torch.no_grad():
        net.weight.zero_()
        net.bias.zero_()
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(16, 4, generator=g), torch.randn(16, 3, generator=g)
    y[:, 0] = 0.0  # an output whose targets the initial head hits exactly
    for _ in range(STEPS):
        opt.zero_grad()
        F.smooth_l1_loss(net(x), y, beta=0.0).backward()
        opt.step()
    return flat(net)


def train_ctc_with_silence() -> torch.Tensor:
    """A frame classifier trained with CTC (zero_infinity=True, as speech recipes set it) on a batch in which one
    utterance is silence (an empty transcript)."""
    torch.manual_seed(0)
    net = torch.nn.Linear(4, 5)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(10, 3, 4, generator=g)
    targets, lengths = torch.tensor([1, 2, 3, 4, 4]), torch.tensor([3, 0, 2])
    for _ in range(STEPS):
        opt.zero_grad()
        F.ctc_loss(F.log_softmax(net(x), 2), targets, torch.tensor([10, 10, 8]), lengths,
                   zero_infinity=True).backward()  # fmt: skip
        opt.step()
    return flat(net)


OPTION_CORPUS: tuple[Mechanism, ...] = (
    Mechanism("BatchNorm with track_running_stats turned off on a live module still moves its statistics",
              f"{PT}/issues/37823", inj.batchnorm_forward_of_torch_1_5, train_frozen_batchnorm, MODES),
    Mechanism("load_state_dict without num_batches_tracked restarts momentum=None's cumulative average",
              f"{PT}/issues/110361", inj.norm_load_resets_count, train_cumulative_batchnorm_resumed, MODES),
    Mechanism("Dropout2d on (N, C, L) input drops whole samples (taken as unbatched (C, H, W))",
              f"{PT}/issues/77081", inj.dropout2d_3d_as_unbatched, train_channel_dropout_sequences, DRAWS),
    Mechanism("scaled_dot_product_attention dropout offsets wrap: (batch, head) slots share one mask",
              f"{PT}/pull/188015", inj.sdpa_dropout_offsets_wrap, train_attention_dropout, DRAWS),
    Mechanism("LSTM inter-layer dropout repeats one mask on every call",
              f"{PT}/pull/185351", inj.lstm_dropout_mask_repeated, train_stacked_lstm, DRAWS),
    Mechanism("cross_entropy weight x label_smoothing x ignore_index: mean divided by the ignored targets' weights too",
              f"{PT}/issues/69339", inj.cross_entropy_smoothing_denominator_counts_ignored, train_smoothed_tagger,
              LOSSES),
    Mechanism("smooth_l1_loss beta=0: NaN gradient where input equals target",
              f"{PT}/issues/96813", inj.smooth_l1_beta0_nan_gradient, train_l1_fit_with_exact_hits, LOSSES),
    Mechanism("ctc_loss takes an empty target as unalignable (inf; 0 with zero_infinity)",
              f"{PT}/issues/18215", inj.ctc_empty_target_unalignable, train_ctc_with_silence, LOSSES),
)  # fmt: skip
