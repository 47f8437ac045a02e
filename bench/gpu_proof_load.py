"""Another process on the GPU, for bench/gpu_proof.sh: `load` keeps it busy, `hold` keeps most of its memory.

    python bench/gpu_proof_load.py load READY_FILE SECONDS   # bf16 matmuls on cuda:0 (gpu.health under load)
    python bench/gpu_proof_load.py hold READY_FILE SECONDS   # 90% of cuda:0's free memory held (a busy GPU)

Writes READY_FILE once the load runs or the memory is held (hold: `bytes_held total_bytes`), then runs until
SECONDS pass or it is killed. Without CUDA it says so and exits 3 (the proof records the step anyway).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    """Run one mode; 0 when it ran its time, 3 without CUDA, 2 on bad arguments."""
    if len(argv) != 3 or argv[0] not in ("load", "hold"):
        print(__doc__, file=sys.stderr)
        return 2
    mode, ready, seconds = argv[0], Path(argv[1]), float(argv[2])
    import torch

    if not torch.cuda.is_available():
        print("no CUDA device: nothing to load or hold", file=sys.stderr)
        return 3
    end = time.monotonic() + seconds
    if mode == "hold":
        free, total = torch.cuda.mem_get_info(0)
        held = torch.empty(int(free * 0.9) // 4, dtype=torch.float32, device="cuda:0")
        held.fill_(1.0)
        torch.cuda.synchronize()
        ready.write_text(f"{held.numel() * 4} {total}\n")
        while time.monotonic() < end:
            time.sleep(0.5)
        return 0
    a = torch.randn(8192, 8192, device="cuda:0", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda:0", dtype=torch.bfloat16)
    (a @ b).sum().item()
    ready.write_text("load\n")
    while time.monotonic() < end:
        for _ in range(20):
            a @ b
        torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
