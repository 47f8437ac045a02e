"""The eager side of the compiled-step check: the model (Linear, LayerNorm, GELU, a softmax attention layer,
BatchNorm1d, label-smoothed cross_entropy), its optimizers, and `sync`, which starts the compiled twin from the eager
copy's exact state before every step."""

from __future__ import annotations

from typing import Any

BATCH, WIDTH, CLASSES = 16, 16, 5


class StepModel:
    """Factory for the model: a small block with every op class of a training step."""

    @staticmethod
    def build(device: str) -> Any:
        import torch

        class Block(torch.nn.Module):  # type: ignore[misc]
            def __init__(self) -> None:
                super().__init__()
                self.inp = torch.nn.Linear(8, WIDTH)
                self.norm = torch.nn.LayerNorm(WIDTH)
                self.qkv = torch.nn.Linear(WIDTH, 3 * WIDTH)
                self.bn = torch.nn.BatchNorm1d(WIDTH)
                self.out = torch.nn.Linear(WIDTH, CLASSES)

            def forward(self, x: Any, y: Any) -> Any:
                h = torch.nn.functional.gelu(self.norm(self.inp(x)))
                q, k, v = self.qkv(h).chunk(3, dim=-1)
                att = torch.softmax(q @ k.transpose(0, 1) / WIDTH**0.5, dim=-1) @ v
                logits = self.out(self.bn(h + att))
                return torch.nn.functional.cross_entropy(logits, y, label_smoothing=0.1)

        torch.manual_seed(0)
        return Block().to(device)


def optimizer(name: str, model: Any) -> Any:
    """SGD (momentum, nesterov) or AdamW (foreach, weight decay) over `model`."""
    import torch

    if name == "SGD":
        return torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    return torch.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.1, foreach=True)


def sync(eager: Any, opt_e: Any, twin: Any, opt_c: Any) -> None:
    """Copy the eager parameters, buffers and optimizer state into the compiled twin, in place (no aliasing, no
    new tensors: the compiled step keeps working on the same objects, as in training)."""
    import torch

    with torch.no_grad():
        for a, b in zip(twin.state_dict().values(), eager.state_dict().values(), strict=True):
            a.copy_(b)
        for p_c, p_e in zip(twin.parameters(), eager.parameters(), strict=True):
            for key, value in opt_e.state.get(p_e, {}).items():
                if key in opt_c.state[p_c]:
                    opt_c.state[p_c][key].copy_(value)
                else:
                    opt_c.state[p_c][key] = value.clone()
