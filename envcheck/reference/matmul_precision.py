"""What a float32 matmul really computes on a device: full float32, or TF32 (inputs rounded to 10 bits).

The environment variables that change it (`TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1` in NVIDIA's NGC images,
`NVIDIA_TF32_OVERRIDE=0`) do not say what happens: whether torch honours them depends on its version
(on the H100 proof host, torch 2.11.0+cu130 with the override set still ran full float32). So the
verdict is measured: every element of full((K, K), 1 + 2**-12) @ ones((K, K)) is exactly K + K * 2**-12
in float32 (each partial sum needs at most 21 significant bits, so the order of the additions does not
matter), while TF32 rounds 1 + 2**-12 to 1 and gives exactly K. The variables only name the cause.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

K = 256
PROBE_VALUE = 1 + 2.0**-12
FLOAT32_RESULT = K * PROBE_VALUE  # 256.0625, exact in float32
TF32_RESULT = float(K)  # the inputs rounded to TF32's 10-bit mantissa
TORCH_OVERRIDE = "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE"
NVIDIA_OVERRIDE = "NVIDIA_TF32_OVERRIDE"
_TRUE = ("1", "true", "yes", "on", "y")


def matmul_mode(
    device: str, allow_tf32: bool = False, matmul: Callable[[Any, Any], Any] | None = None
) -> str:
    """'float32', 'tf32' or 'other': what a float32 matmul on `device` computes with this allow_tf32."""
    import torch

    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = allow_tf32
    try:
        a = torch.full((K, K), PROBE_VALUE, dtype=torch.float32, device=device)
        b = torch.ones((K, K), dtype=torch.float32, device=device)
        values = set((matmul or torch.matmul)(a, b).unique().tolist())
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    if values == {FLOAT32_RESULT}:
        return "float32"
    if values == {TF32_RESULT}:
        return "tf32"
    return "other"


def env_cause(env: Mapping[str, str] | None = None) -> str | None:
    """The variable that would explain a float32/TF32 swap, as `NAME=value`, or None."""
    env = os.environ if env is None else env
    if env.get(NVIDIA_OVERRIDE, "").strip() == "0":
        return f"{NVIDIA_OVERRIDE}=0"
    if env.get(TORCH_OVERRIDE, "").strip().lower() in _TRUE:
        return f"{TORCH_OVERRIDE}={env[TORCH_OVERRIDE].strip()}"
    return None
