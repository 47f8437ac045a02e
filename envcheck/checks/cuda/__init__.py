"""CUDA checks: availability (with a diagnosis), arch coverage, devices and memory; the replayable `cuda` section.

`capture` reads the live system, `layers` holds the diagnosis rules, `verdict` the pure verdicts, `arch` the
build's arch coverage. `cuda.available` and `cuda.devices` replay from a bundle like every other section.
"""

from __future__ import annotations

import os

from envcheck.checks.cuda.arch import arch_coverage, builds_supporting
from envcheck.checks.cuda.capture import capture_cuda, validate_cuda
from envcheck.checks.cuda.layers import visible_mig_devices
from envcheck.checks.cuda.live_errors import gpu_error, gpu_label
from envcheck.checks.cuda.runtime_errors import CHECKS as ERROR_CHECKS
from envcheck.checks.cuda.verdict import cuda_available_verdict, cuda_devices_replay, gpu_count_verdict
from envcheck.core.check import CheckSpec, Context, Needs
from envcheck.core.result import FaultClass, Result, failed, passed, skipped
from envcheck.core.section import Section
from envcheck.probe.gpu_usage import foreign, holder, nvml_gpus, read_usage
from envcheck.probe.system import host_pid_namespace
from envcheck.reference.devices import pci_key

# Finding codes this module emits (each one is in envcheck.cluster.finding_codes.TABLE).
MEMORY_LEAKED = "cuda.memory_leaked"


def cuda_available(ctx: Context) -> Result:
    """torch.cuda.is_available(); when False, name the broken layer and its fix (capture, then replay)."""
    return cuda_available_verdict(capture_cuda(), ctx)


def cuda_arch(ctx: Context) -> Result:
    """Every GPU's compute capability is in the build's arch list, and a kernel runs on each."""
    import torch

    arch_list = torch.cuda.get_arch_list()
    measured: dict[str, object] = {"arch_list": arch_list}
    for i in range(torch.cuda.device_count()):
        cap = torch.cuda.get_device_capability(i)
        name = torch.cuda.get_device_name(i)
        how = arch_coverage(cap, arch_list)
        if how is None:
            sm = f"sm_{cap[0]}{cap[1]}"
            return failed(
                f"{gpu_label(i)}, {sm}, is not covered by this build's arch list {arch_list}",
                f"install a torch build that targets {sm}: {builds_supporting(cap)}",
                measured=measured,
                expected={"covers": sm},
                fault_class=FaultClass.IMAGE,
            )
        want = float((1 << 20) ** 2)  # sum of the first n odd numbers is n^2
        try:
            x = torch.arange(1 << 20, device=f"cuda:{i}", dtype=torch.float64)
            got = float((x * 2 + 1).sum().item())
        except Exception as exc:  # torch.AcceleratorError / RuntimeError from the CUDA runtime
            found = gpu_error(i, exc, "a test kernel failed")
            return failed(found.problem, found.fix, measured=measured, fault_class=found.fault_class)
        if got != want:
            return failed(
                f"{gpu_label(i)} computed {got} for a kernel whose exact answer is {want}",
                "the GPU or driver is faulty: run nvidia-smi -q, check dmesg for Xid errors",
                measured={**measured, "got": got},
                expected={"want": want},
                fault_class=FaultClass.NODE,
            )
        measured[f"gpu{i}"] = {"name": name, "capability": f"{cap[0]}.{cap[1]}", "covered_by": how}
    return passed(
        f"{torch.cuda.device_count()} GPU(s) covered by the build; kernels ran exactly", measured=measured
    )


def cuda_devices(ctx: Context) -> Result:
    """The GPU count matches --expect-gpus, and a fraction of each GPU's memory can be used."""
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    expected = ctx.expect_gpus
    mig = 0
    if expected is not None and expected > count:  # is MIG why? (NVML is only asked when the count is short)
        mig = len(visible_mig_devices(nvml_gpus(), os.environ.get("CUDA_VISIBLE_DEVICES")))
    verdict = gpu_count_verdict(count, ctx, mig)
    if verdict is not None:
        return verdict
    fraction = ctx.options.devices.memory_fraction
    measured: dict[str, object] = {"gpus": count, "fraction": fraction}
    busy: list[str] = []
    for i in range(count):
        try:
            ok, free, total, n = _fill_and_verify(i, fraction)
        except Exception as exc:
            found = gpu_error(i, exc, "allocating and verifying memory failed")
            return failed(found.problem, found.fix, measured=measured, fault_class=found.fault_class)
        if n * 4 > free:
            short = f"{gpu_label(i)}: only {free / 2**30:.1f} GiB free of {total / 2**30:.1f} GiB"
            held = held_by(i)
            if held is None:  # memory in use and, in the host's view of processes, nobody holds it
                return failed(
                    f"{short}, and no process holds it: leaked GPU memory (a context the driver did not "
                    "free)",
                    "drain; nvidia-smi -q -d MEMORY,PIDS -i <index>; reset the GPU (nvidia-smi "
                    "-r -i <index>) or reboot the node",
                    measured={"free_bytes": free, "total_bytes": total},
                    fault_class=FaultClass.NODE,
                    code=MEMORY_LEAKED,
                )
            busy.append(f"{short}: in use by {held}, not tested")
            continue
        if not ok:
            return failed(
                f"{gpu_label(i)}: memory written with 3.0 read back different values",
                "the GPU memory is faulty: run nvidia-smi -q -d ECC and check dmesg for Xid errors",
                fault_class=FaultClass.NODE,
            )
        measured[f"gpu{i}_allocated_gib"] = round(n * 4 / 2**30, 2)
    measured["busy"] = busy
    if busy and len(busy) == count:
        return skipped(
            f"every GPU is in use by other processes, none tested: {'; '.join(busy)}", measured=measured
        )
    tail = f"; {'; '.join(busy)}" if busy else ""
    return passed(
        f"{count - len(busy)} GPU(s); {fraction:.0%} of each GPU's memory allocated and verified{tail}",
        measured=measured,
        expected={"gpus": expected} if expected is not None else {},
    )


def held_by(index: int) -> str | None:
    """Who holds GPU `index`'s memory, by NVML's evidence: its processes; 'processes outside this container's
    view' when this process cannot see the host's (NVML lists only the caller's PID namespace); 'a process NVML
    cannot name' when NVML cannot tell. None only when the host's full view shows no process: a leak."""
    key = pci_key(index)
    usage = read_usage()
    if not isinstance(usage, dict) or key not in usage:
        return (
            f"a process NVML cannot name ({usage if isinstance(usage, str) else 'GPU not matched in NVML'})"
        )
    others = foreign(usage[key].get("processes"))
    if others:
        return holder({"processes": others}) or "another process"
    return (
        None if host_pid_namespace() else "processes outside this container's view (NVML lists only its own)"
    )


def _fill_and_verify(i: int, fraction: float) -> tuple[bool, int, int, int]:
    """(read back ok, free, total, float32 elements) for `fraction` of GPU i's memory; not filled when short."""
    import torch

    free, total = torch.cuda.mem_get_info(i)
    n = int(total * fraction) // 4
    if n * 4 > free:
        return False, free, total, n
    buf = torch.full((n,), 3.0, device=f"cuda:{i}")
    ok = bool((buf == 3.0).all().item())
    del buf
    torch.cuda.empty_cache()
    return ok, free, total, n


CHECKS = (
    CheckSpec(
        "cuda.available",
        cuda_available,
        "torch sees CUDA; otherwise names the broken layer and fix",
        timeout_s=60,
    ),
    CheckSpec(
        "cuda.arch",
        cuda_arch,
        "each GPU's sm_XY is in the build's arch list; a kernel runs on it",
        needs=Needs(torch=True, cuda=True),
        timeout_s=120,
    ),
    CheckSpec(
        "cuda.devices",
        cuda_devices,
        "GPU count matches --expect-gpus; memory allocates and verifies",
        needs=Needs(torch=True),
        timeout_s=120,
    ),
    *ERROR_CHECKS,
)

# The bundle's `cuda` section: required (every bundle has had one), replaying cuda.available and cuda.devices.
SECTION = Section(
    "cuda",
    "cuda.available",
    capture_cuda,
    validate_cuda,
    cuda_available_verdict,
    also=(("cuda.devices", cuda_devices_replay),),
    required=True,
)
