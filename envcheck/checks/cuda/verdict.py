"""The CUDA verdicts as pure functions of captured inputs: the live checks and `envcheck explain` share them.

Nothing here reads the system: the same bundle gives the same verdict on any machine.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from envcheck.checks.cuda.finding import CudaLayers, finding_code
from envcheck.checks.cuda.layers import MIG_FIX, NO_TORCH, diagnose, visible_mig_devices
from envcheck.core.check import Context
from envcheck.core.result import FaultClass, Result, failed, first_of, passed, skipped, warned

# Finding codes this module emits (each one is in envcheck.cluster.finding_codes.TABLE).
GPU_COUNT = "cuda.gpu_count"
MIG_GPU_COUNT = "cuda.mig_gpu_count"
MIG_SINGLE_DEVICE = "cuda.mig_single_device"


def layers_from(cuda: Mapping[str, Any]) -> CudaLayers:
    """The diagnosis's view of a bundle's cuda section."""
    names = {f.name for f in dataclasses.fields(CudaLayers)}
    return CudaLayers(**{k: v for k, v in cuda.items() if k in names})


def cuda_available_verdict(cuda: Mapping[str, Any], ctx: Context) -> Result:
    """cuda.available's verdict for captured inputs: pass with the GPUs, or the broken layers and their fixes."""
    if cuda["available"]:
        names = list(cuda["gpus"])
        slices = visible_mig_devices(cuda.get("nvml_gpus"), cuda["visible_devices"])
        if len(slices) > 1:
            return warned(
                f"{len(slices)} MIG devices are offered to this process but CUDA uses only one: torch "
                f"sees {len(names)} GPU(s): {', '.join(names)}",
                MIG_FIX,
                measured={"gpus": names, "mig_devices": slices},
                fault_class=FaultClass.CONFIG,
                code=MIG_SINGLE_DEVICE,
            )
        return passed(
            f"{len(names)} GPU(s): {', '.join(names)}; torch CUDA {cuda['torch_cuda']}",
            measured={"gpus": names, "torch_cuda": cuda["torch_cuda"]},
        )
    findings = diagnose(layers_from(cuda))
    summary = f"CUDA is not available: {first_of([f.problem for f in findings])}"
    fix = " | ".join(f"{f.layer}: {f.fix}" for f in findings)
    # each finding carries the code its result would have (its own, else its layer's), as the result's own code does
    measured = {"findings": [{**dataclasses.asdict(f), "code": finding_code(f)} for f in findings]}
    if ctx.allow_cpu and findings[0].problem != NO_TORCH:  # --allow-cpu allows no GPU, not no torch
        return warned(
            summary + " (allowed by --allow-cpu)",
            fix,
            measured=measured,
            expected={"cuda_available": True},
            # the run was told no GPU is needed here (--allow-cpu): the caveat is how it was run, nobody's fault,
            # and never a node's (a health check's soft node finding, a reason to keep a node drained)
            fault_class=FaultClass.CONFIG,
            code=finding_code(findings[0]),
        )
    return failed(
        summary,
        fix,
        measured=measured,
        expected={"cuda_available": True},
        fault_class=findings[0].fault_class,
        code=finding_code(findings[0]),
    )


def gpu_count_verdict(count: int, ctx: Context, mig_devices: int = 0) -> Result | None:
    """cuda.devices' count verdict (None: the count is fine and the memory part decides); `mig_devices`: how many
    MIG devices the process was offered (CUDA enumerates one of them)."""
    expected = ctx.expect_gpus
    if expected is not None and count != expected and mig_devices and expected > 1:
        return failed(
            f"{count} GPU(s) visible, {expected} expected: MIG is on ({mig_devices} MIG device(s) "
            "offered) and CUDA enumerates one MIG device per process",
            MIG_FIX,
            measured={"gpus": count, "mig_devices": mig_devices},
            expected={"gpus": expected},
            fault_class=FaultClass.CONFIG,
            code=MIG_GPU_COUNT,
        )
    if expected is not None and count != expected:
        return failed(
            f"{count} GPU(s) visible, {expected} expected",
            "docker run --gpus all (or --gpus '\"device=0,1\"'); check CUDA_VISIBLE_DEVICES",
            measured={"gpus": count},
            expected={"gpus": expected},
            fault_class=FaultClass.CONFIG,
            code=GPU_COUNT,
        )
    if count == 0:
        return skipped("no CUDA device is visible (see cuda.available for why)")
    return None


def cuda_devices_replay(cuda: Mapping[str, Any], ctx: Context) -> Result:
    """cuda.devices' verdict for captured inputs (the count and MIG; memory is not allocated on replay)."""
    if not cuda["torch_installed"]:
        return skipped("needs torch, which is not installed")
    count = len(cuda["gpus"]) if cuda["available"] else 0
    mig = len(visible_mig_devices(cuda.get("nvml_gpus"), cuda["visible_devices"]))
    return gpu_count_verdict(count, ctx, mig) or passed(
        f"{count} GPU(s) (replayed from a bundle: memory was not allocated here)", measured={"gpus": count}
    )
