"""One burn worker (`python -m envcheck.burn.loop CONFIG`): one device, deterministic settings, rounds of every
workload until the coordinator says stop or the deadline passes; each result goes to the coordinator as a line on
the pipe named in CONFIG (stdout and stderr are the worker's log).

A round is `round_s` of wall time, shared by the workloads: each runs on the inputs of seed round % SEEDS until its
share is spent (at least one call), digests every output, and measures the error against the reference of each digest it has not seen
before. Where there are two or more workers, a round starts with an all-reduce of the stop flag, so every worker
stops after the same round and none is left waiting in a collective. CPU workers run one torch thread each, pinned to
their core, so two workers compute the same bits. The stdin pipe is the lifeline: "stop" or its end stops the worker.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import IO, Any

from envcheck.burn import catalogue
from envcheck.burn.workload import Device, Workload, digest, relative_error
from envcheck.collectives.rank_hook import load_rank_hook

SEEDS = 3  # a seed's inputs come back every third round: the repeat a lone GPU is compared with
HOOK_VAR = "ENVCHECK_BURN_HOOK"  # `/path/file.py:function`, called as hook(workload, worker, round, output)
EXIT_AFTER_EOF_S = 10.0  # the coordinator is gone: stop, and exit even if a collective hangs


def _lifeline(stop: threading.Event, stream: IO[str]) -> None:
    for line in stream:
        if line.strip() == "stop":
            stop.set()
    stop.set()
    time.sleep(EXIT_AFTER_EOF_S)
    os._exit(0)


def setup(cfg: dict[str, Any]) -> Device:
    """Deterministic settings, threads and placement for this worker's device."""
    import torch

    # torch.use_deterministic_algorithms also sets Inductor's flag, importing its config (about 800 modules: seconds
    # of a short budget); the burn runs eager code only, so the eager switch it makes is all it needs.
    eager = getattr(torch._C, "_set_deterministic_algorithms", None)
    if eager is not None:
        eager(True)
    else:
        torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.set_num_threads(int(cfg["threads"]))
    if cfg["device"] == "cpu":
        if cfg.get("core") is not None and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {int(cfg["core"])})
        return Device("cpu", "cpu")
    index = int(cfg["device"].split(":")[1])
    torch.cuda.set_device(index)
    props = torch.cuda.get_device_properties(index)
    return Device("cuda", f"cuda:{index}", (int(props.major), int(props.minor)))


def describe(cfg: dict[str, Any], device: Device) -> dict[str, Any]:
    """The hello record: which device, its model (what bit-for-bit comparison groups by) and the software stack."""
    import platform

    import torch

    stack = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if device.kind == "cuda" else None,
        "threads": torch.get_num_threads(),
    }
    if device.kind == "cpu":
        name = cpu_model() or platform.processor() or "CPU"
        return {
            "kind": "cpu",
            "index": cfg["index"],
            "core": cfg.get("core"),
            "name": name,
            "model": name,
            **stack,
        }
    from envcheck.reference.devices import gpu_model, pci_key

    index = int(cfg["device"].split(":")[1])
    name, major, minor, sms = gpu_model(index)
    props = torch.cuda.get_device_properties(index)
    uuid = str(getattr(props, "uuid", "") or "")
    return {
        "kind": "cuda",
        "index": index,
        "name": name,
        "model": f"{name} (sm_{major}{minor}, {sms} SMs)",
        "uuid": uuid if not uuid or uuid.startswith("GPU-") else f"GPU-{uuid}",
        "pci": pci_key(index),
        **stack,
    }


def cpu_model(path: str = "/proc/cpuinfo") -> str | None:
    """The CPU's model name as /proc/cpuinfo gives it."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()[:80] or None
    except OSError:
        return None
    return None


def join(cfg: dict[str, Any]) -> None:
    """Join the burn's process group (NCCL between GPUs, gloo between CPU workers) through the coordinator's file."""
    import torch.distributed as dist

    dist.init_process_group(
        "nccl" if cfg["device"] != "cpu" else "gloo",
        init_method=f"file://{cfg['store']}",
        rank=int(cfg["index"]),
        world_size=int(cfg["world"]),
        timeout=timedelta(seconds=float(cfg["collective_timeout_s"])),
    )


def prepare(device: Device, only: list[str]) -> tuple[list[Workload], dict[str, str]]:
    """The workloads that run here, and why each other one cannot (not supported, or its first call or its reference
    raised: an op this torch or device lacks, or one with no deterministic implementation here)."""
    runnable, skipped = [], {}
    for work in catalogue.chosen(only):
        why = work.supported(device)
        if why is None:
            try:
                inputs = work.inputs(device, 0)
                work.run(inputs)
                work.reference(inputs)
            except Exception as exc:  # an op this torch or device lacks: said, never fatal
                why = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
        if why is None:
            runnable.append(work)
        else:
            skipped[work.name] = why
    return runnable, skipped


class Burner:
    """The rounds of one worker."""

    def __init__(
        self, cfg: dict[str, Any], device: Device, workloads: list[Workload], send: Callable[..., None]
    ):
        self.cfg, self.device, self.workloads, self.send = cfg, device, workloads, send
        self.inputs: dict[tuple[str, int], Any] = {}
        self.seen: set[tuple[str, int, str]] = set()
        self.hook: Callable[..., None] | None = load_rank_hook(os.environ.get(HOOK_VAR) or "", var=HOOK_VAR)
        self.collective = any(w.kind == "all_reduce" for w in workloads)

    def _sync(self) -> None:
        if self.device.kind == "cuda":
            import torch

            torch.cuda.synchronize()

    def one(self, work: Workload, rnd: int, until: float) -> None:
        """Run `work` for round `rnd` until `until` (CLOCK_MONOTONIC; at least one call, exactly one for a
        collective, which every rank must make alike) and send its result."""
        seed = rnd % SEEDS
        key = (work.name, seed)
        if key not in self.inputs:
            self.inputs[key] = work.inputs(self.device, seed)
        inputs = self.inputs[key]
        calls, counts, errors, spent, cpu = 0, dict[str, int](), dict[str, float](), 0.0, 0.0
        while calls == 0 or (work.kind != "all_reduce" and time.monotonic() < until):
            self._sync()
            began, began_cpu = time.perf_counter(), time.process_time()
            out = work.run(inputs)
            self._sync()
            spent += time.perf_counter() - began
            cpu += time.process_time() - began_cpu
            calls += 1
            if self.hook is not None:
                self.hook(work.name, int(self.cfg["index"]), rnd, out)
            dig = digest(out)
            counts[dig] = counts.get(dig, 0) + 1
            if (work.name, seed, dig) not in self.seen:
                self.seen.add((work.name, seed, dig))
                errors[dig] = relative_error(out, work.reference(inputs))
        self.send(
            type="result",
            w=work.name,
            r=rnd,
            s=seed,
            n=calls,
            t=spent,
            c=cpu if self.device.kind == "cpu" else None,  # a GPU worker's CPU time says nothing of its GPU
            work=work.work(inputs),
            d=counts,
            e=errors,
            at=time.monotonic(),
        )

    def stop_agreed(self, stop: threading.Event) -> bool:
        """Whether to stop before the next round: this worker's stop or deadline, agreed by all workers."""
        local = stop.is_set() or time.monotonic() >= float(self.cfg["deadline"])
        if int(self.cfg["world"]) < 2:
            return local
        import torch
        import torch.distributed as dist

        flag = torch.tensor([1.0 if local else 0.0], device=self.device.torch_device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item() > 0)

    def burn(self, stop: threading.Event) -> int:
        """Rounds until stopped; how many ran. A round is a slice of wall time (round_s), shared evenly by the
        workloads, so a slow device makes fewer calls in it rather than holding its peers' rounds back, as long as one
        of its calls is shorter than a share (each workload makes at least one call a round)."""
        rnd = 0
        share = float(self.cfg["round_s"]) / max(1, len(self.workloads))
        while not self.stop_agreed(stop):
            began = time.monotonic()
            for k, work in enumerate(self.workloads):
                self.one(work, rnd, began + (k + 1) * share)
            rnd += 1
        return rnd


def main(argv: list[str]) -> int:
    """Run one worker; 0 when it stopped as told, 1 when it failed (the error record says why)."""
    cfg = json.loads(argv[0])
    out = os.fdopen(int(cfg["out_fd"]), "w", buffering=1)
    lock = threading.Lock()

    def send(**record: Any) -> None:
        with lock:
            out.write(json.dumps(record) + "\n")

    stop = threading.Event()
    # fd 0 itself, not sys.stdin: a worker forked from a process whose sys.stdin was replaced (a test runner's
    # capture) still reads its lifeline
    lifeline = open(0, encoding="utf-8", errors="replace", closefd=False)
    threading.Thread(target=_lifeline, args=(stop, lifeline), daemon=True).start()
    try:
        device = setup(cfg)
        send(type="hello", pid=os.getpid(), at=time.monotonic(), **describe(cfg, device))
        if int(cfg["world"]) > 1:
            join(cfg)
        workloads, skipped = prepare(device, list(cfg["only"]))
        send(type="ready", workloads=[w.name for w in workloads], skipped=skipped, at=time.monotonic())
        rounds = Burner(cfg, device, workloads, send).burn(stop)
        send(type="done", rounds=rounds)
        return 0
    except Exception as exc:  # the coordinator names it; no traceback reaches the user's terminal
        send(type="error", what=f"{type(exc).__name__}: {exc}")
        return 1
    finally:
        out.flush()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
