"""envcheck: prove that a PyTorch + CUDA environment works on the host it lands on."""

from __future__ import annotations

__version__ = "0.1.0"
