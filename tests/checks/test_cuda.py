"""cuda.* checks: real runs on this CPU machine, plus the diagnosis for layers only a GPU host has.

The driver/capability/device-node cases cannot occur without a GPU host, so they feed `diagnose()`
injected layer states (a mocked GPU host, said so here); the CPU-only-torch and CUDA_VISIBLE_DEVICES
cases are also produced for real through the CLI.
"""

from __future__ import annotations

import json

import pytest

from envcheck.checks.cuda_arch import arch_coverage, builds_supporting
from envcheck.checks.cuda_diagnosis import CudaLayers, diagnose
from envcheck.core.result import Status
from tests.helpers import run_check, run_cli

GPU_HOST = dict(torch_installed=True, torch_cuda="12.8", device_nodes=["nvidia0", "nvidiactl"],
                proc_driver=True, in_container=True, driver_cuda=12080,
                driver_capabilities="compute,utility")


def layers(**changes: object) -> CudaLayers:
    return CudaLayers(**{**GPU_HOST, **changes})  # type: ignore[arg-type]


def test_cuda_available_fails_strict_and_warns_with_allow_cpu() -> None:
    strict = run_check("cuda.available", allow_cpu=False)
    relaxed = run_check("cuda.available", allow_cpu=True)
    assert strict.status is Status.FAIL and strict.remediation
    assert relaxed.status is Status.WARN and relaxed.summary.startswith(strict.summary)


def _findings(*args: str, env_extra: dict[str, str] | None = None) -> list[dict[str, str]]:
    import os

    env = {**os.environ, **(env_extra or {})}
    done = run_cli("run", "--only", "cuda.available", "--json", "-", *args, env=env)
    return json.loads(done.stdout)["results"][0]["measured"]["findings"]  # type: ignore[no-any-return]


def test_cpu_only_torch_is_named_with_its_fix() -> None:
    import torch

    if torch.version.cuda is not None:
        pytest.skip("this venv has a CUDA torch; the CPU-only case is covered by the diagnosis unit test")
    (torch_finding,) = [f for f in _findings() if f["layer"] == "torch"]
    assert "CPU-only" in torch_finding["problem"] and "pip install" in torch_finding["fix"]


def test_empty_cuda_visible_devices_is_named() -> None:
    found = _findings(env_extra={"CUDA_VISIBLE_DEVICES": ""})
    (cvd,) = [f for f in found if f["layer"] == "CUDA_VISIBLE_DEVICES"]
    assert "empty" in cvd["problem"] and "unset CUDA_VISIBLE_DEVICES" in cvd["fix"]


def test_healthy_mocked_gpu_host_has_no_known_finding() -> None:
    (only,) = diagnose(layers(torch_error="some unknown failure"))
    assert only.layer == "unknown" and "some unknown failure" in only.problem


@pytest.mark.parametrize("changes, layer, problem, fix", [
    (dict(device_nodes=[], proc_driver=False), "container", "without GPU access", "--gpus all"),
    (dict(device_nodes=[], proc_driver=False, in_container=False), "driver", "no NVIDIA driver", "install"),
    (dict(libcuda_error="libcuda.so.1: cannot open", driver_cuda=None, driver_capabilities="utility"),
     "libcuda", "lacks 'compute'", "NVIDIA_DRIVER_CAPABILITIES=compute,utility"),
    (dict(driver_cuda=12020), "driver", "driver supports CUDA 12.2, but torch was built for CUDA 12.8",
     ">= 570.26"),
    (dict(driver_cuda=12080, torch_cuda="13.0"), "driver", "supports CUDA 12.8", "-cuda12.x"),
    (dict(visible_devices="-1"), "CUDA_VISIBLE_DEVICES", "invalid", "unset"),
    (dict(visible_devices="3"), "CUDA_VISIBLE_DEVICES", "only 1 exist", "unset"),
    (dict(torch_cuda=None), "torch", "CPU-only", "pip install"),
])
def test_each_broken_layer_is_named_with_its_fix(changes: dict[str, object], layer: str, problem: str,
                                                 fix: str) -> None:
    found = {f.layer: f for f in diagnose(layers(**changes))}
    assert layer in found, found
    assert problem in found[layer].problem and fix in found[layer].fix


def test_valid_visible_devices_are_not_flagged() -> None:
    assert diagnose(layers(visible_devices="0"))[0].layer == "unknown"
    assert diagnose(layers(visible_devices="GPU-1234-abcd"))[0].layer == "unknown"


@pytest.mark.parametrize("cap, arch_list, covered", [
    ((9, 0), ["sm_80", "sm_90"], "sm_90 SASS"),
    ((8, 6), ["sm_80"], "sm_80 SASS"),
    ((8, 9), ["sm_90"], None),
    ((12, 0), ["sm_80", "sm_90", "compute_90"], "compute_90 PTX"),
    ((9, 0), ["sm_90a"], "sm_90a SASS"),
    ((10, 0), ["sm_90a"], None),
    ((7, 0), ["sm_75", "sm_80"], None),
])
def test_arch_coverage(cap: tuple[int, int], arch_list: list[str], covered: str | None) -> None:
    how = arch_coverage(cap, arch_list)
    assert (how is None) if covered is None else (how is not None and how.startswith(covered))


def test_builds_supporting_names_a_cuda_release() -> None:
    assert "CUDA >= 12.8" in builds_supporting((12, 0))
    assert "CUDA <= 12.9" in builds_supporting((7, 0))


def test_expect_gpus_mismatch_fails() -> None:
    result = run_check("cuda.devices", expect_gpus=2)
    assert result.status is Status.FAIL and "0 GPU(s) visible, 2 expected" in result.summary


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["cuda.available", "cuda.arch", "cuda.devices", "cudnn.conv", "vision.ops"])
def test_gpu_checks_pass_on_a_healthy_gpu(name: str) -> None:
    result = run_check(name, allow_cpu=False)
    assert result.status in (Status.PASS, Status.WARN), result
