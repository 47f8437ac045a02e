"""The two ways a training state reaches fresh objects in the state round-trip check: through a file as users save it
(torch.save, then torch.load with weights_only and map_location), and, as the reference across devices, the same
state copied and moved tensor by tensor with no serialization at all."""

from __future__ import annotations

import io
from typing import Any


def _move(state: Any, device: str) -> Any:
    import torch

    if isinstance(state, torch.Tensor):
        return state.to(device)
    if isinstance(state, dict):
        return {k: _move(v, device) for k, v in state.items()}
    if isinstance(state, (list, tuple)):
        return type(state)(_move(v, device) for v in state)
    return state


def through_file(state: dict[str, Any], target: str) -> dict[str, Any]:
    """torch.save to a buffer, torch.load(weights_only=True, map_location=target)."""
    import torch

    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    loaded: dict[str, Any] = torch.load(buf, weights_only=True, map_location=target)
    return loaded


def by_hand(state: dict[str, Any], target: str) -> dict[str, Any]:
    """The same state, copied and moved to `target` tensor by tensor (no serialization)."""
    import copy

    moved: dict[str, Any] = _move(copy.deepcopy(state), target)
    return moved
