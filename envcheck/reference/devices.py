"""Where numerics checks run: CPU always, plus one visible CUDA device of each GPU model; and sane thread counts.

A numerics check judges the arithmetic of this torch build on this kind of GPU. Eight GPUs of one model run the same
kernels, libraries and clocks' worth of arithmetic, so one GPU of each model stands for the others: judging all of
them multiplies a full run by the GPU count (train.state_roundtrip's device pairs by its square: 81 on an 8-GPU node;
three pairs took 82 s on one H100) and blows the checks' timeouts on a healthy node, while a GPU that
computes wrong on its own is a hardware fault that cuda.arch (a kernel on every GPU), cuda.devices (a memory pattern on
every GPU), gpu.health (ECC, Xid, row remapping) and dcgm.diag are there to find. Two models on one node (rare) are
both judged. Of one model's GPUs, the first that no other process uses is the one judged (check_devices).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator

from envcheck.probe.gpu_usage import IN_USE_MIB, others_use, read_usage

# The checks use tiny tensors: one CPU thread is fastest, and immune to OpenMP spin contention on a busy
# host (measured here: a 60-step MLP run took 0.5 s on 1 thread, 4-7 s on 2 threads under load).
MAX_THREADS = 1


def gpu_model(index: int) -> tuple[str, int, int, int]:
    """What makes two visible GPUs the same for numerics: name, compute capability and SM count (a MIG slice or a
    PCIe card of the same name has fewer SMs)."""
    import torch

    props = torch.cuda.get_device_properties(index)
    return (
        str(props.name),
        int(props.major),
        int(props.minor),
        int(getattr(props, "multi_processor_count", 0)),
    )


def pci_key(index: int) -> str | None:
    """Visible GPU `index`'s PCI address as probe.gpu_usage keys it ('0000:18:00'), from torch's device properties
    (no CUDA context); None when torch does not give it."""
    import torch

    props = torch.cuda.get_device_properties(index)
    bus = getattr(props, "pci_bus_id", None)
    if bus is None:
        return None
    return f"{int(getattr(props, 'pci_domain_id', 0)):04x}:{int(bus):02x}:{int(getattr(props, 'pci_device_id', 0)):02x}"


Use = tuple[
    bool, int | None
]  # (another process uses it, MiB in use beyond the model's least used GPU; None: unknown)


@functools.cache
def gpu_use() -> dict[int, tuple[bool, int]]:
    """Each visible GPU's (NVML lists another process on it, MiB in use beyond this process's own) by torch index
    (probe.gpu_usage.others_use); a GPU NVML cannot read is left out, and all are when NVML cannot tell. Read once per
    process, normally before it creates a CUDA context; a GPU this process already holds a context on is its own."""
    import torch

    usage = read_usage()
    if not isinstance(usage, dict):
        return {}
    has_context = getattr(torch._C, "_cuda_hasPrimaryContext", None)
    out: dict[int, tuple[bool, int]] = {}
    for i in range(torch.cuda.device_count()):
        key = pci_key(i)
        if key is None or key not in usage:
            continue
        out[i] = (False, 0) if has_context is not None and has_context(i) else others_use(usage[key])
    return out


def _models() -> dict[tuple[str, int, int, int], list[tuple[int, Use]]]:
    """The visible GPUs by model, each with its use and ordered for use: free ones first (in torch's order), then
    the ones NVML could not read, then the used ones, least used first. A GPU is used when NVML lists another process
    on it or its memory in use exceeds the model's least used GPU's by IN_USE_MIB (a context; the driver's reserve is
    the same on each). NVML is asked only when a model has two GPUs or more."""
    import torch

    models: dict[tuple[str, int, int, int], list[int]] = {}
    for i in range(torch.cuda.device_count()):
        models.setdefault(gpu_model(i), []).append(i)
    use = gpu_use() if any(len(ids) > 1 for ids in models.values()) else {}
    out: dict[tuple[str, int, int, int], list[tuple[int, Use]]] = {}
    for model, ids in models.items():
        base = min((use[i][1] for i in ids if i in use), default=0)
        judged: list[tuple[int, Use]] = [
            (
                i,
                (use[i][0] or use[i][1] - base >= IN_USE_MIB, use[i][1] - base)
                if i in use
                else (False, None),
            )
            for i in ids
        ]
        out[model] = sorted(judged, key=lambda gpu: _rank(gpu, bool(use)))
    return out


def _rank(gpu: tuple[int, Use], nvml_answered: bool) -> tuple[bool, bool, int, int]:
    """Free GPUs first in torch's order, then the ones NVML answered for but could not read, then the used ones,
    least used first."""
    index, (used, mib) = gpu
    return used, mib is None and nvml_answered, (mib or 0) if used else 0, index


def check_devices() -> list[str]:
    """`cpu` followed by one visible CUDA device of each GPU model (`cuda:0` alone on an idle node of one model).

    Of several GPUs of one model, the first that no other process uses stands for them (on a shared node another
    job's GPU is busy, not a place to judge arithmetic); when every one is in use, the least used; when NVML cannot
    tell, the first."""
    import torch

    if not torch.cuda.is_available():
        return ["cpu"]
    return ["cpu", *(f"cuda:{gpus[0][0]}" for gpus in _models().values())]


def cuda_devices() -> list[str]:
    """The visible CUDA devices numerics checks run on, one of each model (empty without a GPU)."""
    return [d for d in check_devices() if d != "cpu"]


def peer_device(device: str) -> str | None:
    """Another visible GPU of `device`'s model that no other process uses (the next one check_devices would pick), or
    None: where a state saved on one GPU is loaded onto another, never onto another job's GPU."""
    index = torch_index(device)
    for gpus in _models().values():
        if any(i == index for i, _ in gpus):
            return next((f"cuda:{i}" for i, (used, _) in gpus if i != index and not used), None)
    return None


def torch_index(device: str) -> int:
    """'cuda:3' -> 3 ('cuda' -> 0)."""
    return int(device.partition(":")[2] or 0)


def on_device(device: str) -> contextlib.AbstractContextManager[object]:
    """Make `device` torch's current CUDA device for the block (a CPU device changes nothing), so that what torch
    does on the current device (autocast's bfloat16 probe, an autotuner's benchmark) happens on the GPU under test,
    never on GPU 0, which may be another job's. torch creates no context on the device it restores."""
    if not device.startswith("cuda"):
        return contextlib.nullcontext()
    import torch

    current: contextlib.AbstractContextManager[object] = torch.cuda.device(torch_index(device))
    return current


@contextlib.contextmanager
def numerics_mode(seed: int = 0, device: str | None = None) -> Iterator[None]:
    """Seed torch, use MAX_THREADS CPU threads, disable TF32 (so float32 means float32), and make `device` torch's
    current device (on_device; default: the first GPU the numerics run on, so that implicit work never lands on
    another job's GPU 0; a rank passes its own); restore afterwards. A GPU that cannot be made current is left to
    each check's own per-device handling, which names its error, and the CPU half still runs."""
    import torch

    current = device if device is not None else next(iter(cuda_devices()), "cpu")
    threads = torch.get_num_threads()
    tf32 = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.manual_seed(seed)
    torch.set_num_threads(max(1, min(threads, MAX_THREADS)))
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        with contextlib.ExitStack() as stack:
            with contextlib.suppress(Exception):  # a busy, lost or broken GPU: each check meets and names it
                stack.enter_context(on_device(current))
            yield
    finally:
        torch.set_num_threads(threads)
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32


def native_bf16(device: str) -> bool:
    """Whether a CUDA device computes bfloat16 natively (sm_80+), not by emulation.

    Recent torch's is_bf16_supported() also answers True on T4/V100, where bfloat16 is emulated (slow, and not
    what AMP should be judged on); so ask with including_emulation=False, or read the capability.
    """
    import inspect

    import torch

    if torch.version.hip:
        return True
    index = torch_index(device)
    if "including_emulation" in inspect.signature(torch.cuda.is_bf16_supported).parameters:
        with torch.cuda.device(index):
            return bool(torch.cuda.is_bf16_supported(including_emulation=False))
    return tuple(torch.cuda.get_device_capability(index)) >= (8, 0)
