"""facts beyond collect_env: compiler, libc, packages, runtime env (redacted), build arch flags (the cgroup limits:
tests/probe/test_cgroup_layouts.py and test_cgroup_real.py)."""

from __future__ import annotations

import os

import pytest

from envcheck.probe import facts
from envcheck.probe.facts import package_facts, runtime_env, toolchain_facts, torch_build_facts
from tests.helpers import run_cli


def test_runtime_env_is_kept_and_secrets_are_redacted() -> None:
    env = {
        "NCCL_DEBUG": "INFO",
        "NCCL_IB_HCA": "mlx5",
        "GLOO_SOCKET_IFNAME": "eth0",
        "OMP_NUM_THREADS": "4",
        "LD_LIBRARY_PATH": "/usr/local/cuda/lib64",
        "LD_PRELOAD": "",
        "PYTHONPATH": "/src",
        "NCCL_AUTH_TOKEN": "s3cr3t",
        "OMP_PASSWORD": "hunter2",
        "GLOO_CREDENTIALS": "x",
        "NCCL_PROXY": "https://alice:tok3n@proxy.example:3128/",
        "HOME": "/root",
        "HF_TOKEN": "hf_x",
    }
    out = runtime_env(env)
    assert out["NCCL_DEBUG"] == "INFO" and out["OMP_NUM_THREADS"] == "4" and out["PYTHONPATH"] == "/src"
    assert out["LD_LIBRARY_PATH"] == "/usr/local/cuda/lib64" and out["GLOO_SOCKET_IFNAME"] == "eth0"
    assert out["NCCL_AUTH_TOKEN"] == out["OMP_PASSWORD"] == out["GLOO_CREDENTIALS"] == "<redacted>"
    assert out["NCCL_PROXY"] == "https://<redacted>@proxy.example:3128/"
    assert "HOME" not in out and "HF_TOKEN" not in out
    assert not any(secret in str(out) for secret in ("s3cr3t", "hunter2", "tok3n", "alice"))


def test_toolchain_names_the_real_compiler_and_libc() -> None:
    out = toolchain_facts()
    assert isinstance(out["libc"], str) and out["libc"]
    assert isinstance(out["cc"], str) and ("gcc" in out["cc"] or "clang" in out["cc"] or "cc" in out["cc"])


def test_toolchain_without_compilers_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.delenv("CXX", raising=False)
    assert "no cc / gcc / clang on PATH" in toolchain_facts()["cc"]["absent"]


def test_packages_list_numpy_triton_and_nvidia_distributions() -> None:
    import importlib.metadata

    out = package_facts()
    assert out["numpy"] == importlib.metadata.version("numpy")
    assert "triton" in out
    names = {(d.metadata["Name"] or "").lower() for d in importlib.metadata.distributions()}
    assert set(out["nvidia"]) == {
        n for n in names if n.startswith(("nvidia-", "cuda-")) or n == "pytorch-triton"
    }


def test_build_arch_flags_without_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    if not torch.version.cuda:
        assert "CPU-only build" in torch_build_facts()["arch_flags"]["absent"]
        monkeypatch.setattr(torch.version, "cuda", "13.0")
        monkeypatch.setattr(
            torch._C, "_cuda_getArchFlags", lambda: "sm_75 sm_80 sm_120 compute_120", raising=False
        )
    flags = torch_build_facts()["arch_flags"]
    assert isinstance(flags, list) and all(f.startswith(("sm_", "compute_")) for f in flags)


def test_facts_command_has_the_new_sections() -> None:
    import json

    done = run_cli(
        "facts", "--json", "-", env={**os.environ, "NCCL_SOCKET_IFNAME": "lo", "NCCL_API_KEY": "do-not-print"}
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert {"toolchain", "packages", "cgroup", "runtime_env", "torch_build"} <= set(doc)
    assert doc["runtime_env"]["NCCL_SOCKET_IFNAME"] == "lo" and "do-not-print" not in done.stdout
    assert facts.collect_env_parity  # the additive entry point the --bundle capture can call
