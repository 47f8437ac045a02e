"""One rank of a single-node run: `python -m envcheck.collectives.rank RANK WORLD PORT DIR CONFIG`.

PORT is the coordinator's TCPStore port, or `fd:N` (forked ranks) to read it from pipe N.

Started by `launch.py`. It appends each phase it enters to DIR/rank<R>.progress (the coordinator's
heartbeat), joins the coordinator's TCPStore, runs the plan and writes DIR/rank<R>.json.
"""

from __future__ import annotations

import json
import os
import select
import sys
import time
import traceback
from datetime import timedelta
from pathlib import Path
from typing import Any


def progress_writer(path: Path) -> Any:
    """A callable that appends `phase unix-time` per line, flushed at once."""
    handle = path.open("a", buffering=1)

    def progress(phase: str) -> None:
        handle.write(f"{phase} {time.time():.3f}\n")
        handle.flush()

    return progress


def read_port(text: str, timeout_s: float) -> int:
    """A port number, or `fd:N`: read the port (one line) from pipe N within the timeout."""
    if not text.startswith("fd:"):
        return int(text)
    fd = int(text[3:])
    ready, _, _ = select.select([fd], [], [], timeout_s)
    line = os.read(fd, 64) if ready else b""
    os.close(fd)
    if not line.strip():
        raise TimeoutError(f"no rendezvous port from the coordinator within {timeout_s:g}s")
    return int(line)


def main(argv: list[str]) -> int:
    """Run one rank; exit 0 after writing results, 1 after writing the error."""
    rank, world = int(argv[0]), int(argv[1])
    out_dir, config = Path(argv[3]), json.loads(argv[4])
    progress = progress_writer(out_dir / f"rank{rank}.progress")
    progress("started")
    try:
        port = read_port(argv[2], float(config["collective_timeout_s"]))
        import torch
        import torch.distributed as dist

        from envcheck.collectives.rank_hook import load_rank_hook
        from envcheck.collectives.rank_plan import run_plan

        progress("store")
        timeout = timedelta(seconds=float(config["collective_timeout_s"]))
        store = dist.TCPStore("127.0.0.1", port, world, is_master=False, timeout=timeout)
        device = torch.device("cpu")
        kwargs: dict[str, Any] = {}
        if config["backend"] == "nccl":
            device = torch.device("cuda", rank)
            torch.cuda.set_device(device)
            kwargs["device_id"] = device  # eager NCCL communicator init
        progress("init")
        dist.init_process_group(
            config["backend"], store=store, rank=rank, world_size=world, timeout=timeout, **kwargs
        )
        progress("barrier")  # the first collective: ranks past this phase have reached the transport
        dist.barrier()
        progress("ready")
        found = run_plan(
            rank,
            world,
            device,
            tuple(config["steps"]),
            tuple(config["sizes"]),
            progress,
            load_rank_hook(),
            float(config["memory_fraction"]),
            config.get("floor_bytes"),
        )
        found["nccl_version"] = _nccl_version() if config["backend"] == "nccl" else None
        (out_dir / f"rank{rank}.json").write_text(json.dumps(found))
        dist.destroy_process_group()
        return 0
    except BaseException as exc:  # report anything, including KeyboardInterrupt, to the coordinator
        (out_dir / f"rank{rank}.json").write_text(
            json.dumps(
                {
                    "rank": rank,
                    "error": f"{type(exc).__name__}: {exc}".splitlines()[0][:500],
                    "traceback": traceback.format_exc()[-4000:],
                }
            )
        )
        return 1


def _nccl_version() -> str | None:
    import torch

    try:
        return ".".join(str(v) for v in torch.cuda.nccl.version())
    except Exception:
        return None


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    os._exit(code)  # skip interpreter teardown; the process group is already destroyed
