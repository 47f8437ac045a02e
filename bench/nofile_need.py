"""Print how many open files a PyTorch job's main process needs (container.runtime's nofile threshold, measured).

Usage: PYTHONPATH=. python bench/nofile_need.py [--workers 8] [--batches 60]

Two real workloads, each in a child process whose soft RLIMIT_NOFILE is set first (the hard limit is left as it is):
- a DataLoader with N worker processes (the default `file_descriptor` sharing strategy on Linux: every tensor a
  worker sends travels as a file descriptor), prefetch_factor 2, batches of four tensors, consumed one at a time as
  a training loop does;
- a gloo process group of 4 forked ranks doing all_reduce (c10d's TCPStore and gloo's pairs are sockets).
For each it prints the peak number of descriptors the main process (rank 0) held, and the smallest soft limit at
which it still finishes (a bisection). NCCL is not measured here: it raises its own soft limit to the hard one at
init (NVIDIA/nccl src/bootstrap.cc, setFilesLimit), so only the hard limit bounds it. Never asserted in tests.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import signal
import subprocess
import sys

DATALOADER = """
import os, resource, sys, json, torch
from torch.utils.data import DataLoader, Dataset
resource.setrlimit(resource.RLIMIT_NOFILE, ({soft}, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
class Items(Dataset):
    def __len__(self): return {batches} * 8
    def __getitem__(self, i):
        return {{"x": torch.full((64,), float(i)), "y": torch.tensor(i), "m": torch.ones(8), "w": torch.zeros(4)}}
peak = 0
loader = DataLoader(Items(), batch_size=8, num_workers={workers}, prefetch_factor=2)
total = 0.0
for batch in loader:
    total += float(batch["x"].sum())
    peak = max(peak, len(os.listdir("/proc/self/fd")))
print(json.dumps({{"peak_fds": peak}}))
"""

GLOO = """
import os, resource, json, socket, torch, torch.distributed as dist, torch.multiprocessing as mp
resource.setrlimit(resource.RLIMIT_NOFILE, ({soft}, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
def rank(r, world, port, q):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{{port}}", rank=r, world_size=world)
    t = torch.ones(1 << 16)
    for _ in range(5): dist.all_reduce(t)
    q.put((r, len(os.listdir("/proc/self/fd"))))
    dist.barrier(); dist.destroy_process_group()
if __name__ == "__main__":
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    ctx = mp.get_context("fork"); q = ctx.Queue()
    procs = [ctx.Process(target=rank, args=(r, 4, port, q)) for r in range(4)]
    for p in procs: p.start()
    for p in procs: p.join(120)
    got = dict(q.get(timeout=5) for _ in procs)
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    print(json.dumps({{"peak_fds": max(got.values())}}))
"""


def attempt(template: str, soft: int, **kw: int) -> dict[str, int] | None:
    """Run the workload under `soft` in its own session; its figures, or None when it failed. A workload that
    hangs (out of descriptors, a rank never arrives) is killed with its whole process group: nothing outlives it."""
    code = template.format(soft=soft, **kw)
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        out = ""
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # forked ranks and DataLoader workers too
        proc.wait()
    if proc.returncode != 0 or not out.strip():
        return None
    figures: dict[str, int] = json.loads(out.strip().splitlines()[-1])
    return figures


def smallest(template: str, high: int, **kw: int) -> tuple[int, int]:
    """(peak fds at `high`, the smallest soft limit that still finishes)."""
    top = attempt(template, high, **kw)
    if top is None:
        raise SystemExit(f"the workload fails even with nofile {high}")
    lo, hi = 8, high
    while hi - lo > 4:
        mid = (lo + hi) // 2
        if attempt(template, mid, **kw) is None:
            lo = mid
        else:
            hi = mid
    return top["peak_fds"], hi


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--batches", type=int, default=60)
    args = parser.parse_args()
    high = min(4096, resource.getrlimit(resource.RLIMIT_NOFILE)[1])
    print(f"soft/hard here: {resource.getrlimit(resource.RLIMIT_NOFILE)}")
    peak, need = smallest(DATALOADER, high, workers=args.workers, batches=args.batches)
    print(
        f"DataLoader, {args.workers} workers, prefetch 2, 4 tensors/batch: peak {peak} fds in the main process; "
        f"finishes with a soft limit of {need} or more"
    )
    peak, need = smallest(GLOO, high)
    print(
        f"gloo, 4 ranks, all_reduce: peak {peak} fds in a rank; finishes with a soft limit of {need} or more"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
