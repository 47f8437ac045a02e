"""facts beyond collect_env: compiler, libc, packages, cgroup limits, runtime env (redacted), build arch flags."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from envcheck.probe import facts
from envcheck.probe.facts import cgroup_limits, package_facts, runtime_env, toolchain_facts, torch_build_facts
from tests.helpers import ROOT, run_cli


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


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


def test_cgroup_v2_docker_cpus_1_memory_3g(tmp_path: Path) -> None:
    """What `docker run --cpus 1 --memory 3g` leaves in a private cgroup namespace."""
    root = _tree(
        tmp_path / "cg",
        {"cgroup.controllers": "cpu memory", "cpu.max": "100000 100000\n", "memory.max": "3221225472\n"},
    )
    proc = _tree(tmp_path, {"self.cgroup": "0::/\n"}) / "self.cgroup"
    out = cgroup_limits(str(root), str(proc))
    assert out["version"] == 2 and out["cpu_quota"] == 1.0 and out["cpus_usable"] == 1
    assert out["memory_limit_bytes"] == 3 * 2**30 and out["memory_limit_gib"] == 3.0


def test_cgroup_v2_nested_takes_the_tightest_ancestor(tmp_path: Path) -> None:
    root = _tree(
        tmp_path / "cg",
        {
            "cgroup.controllers": "",
            "a/cpu.max": "50000 100000",
            "a/memory.max": "max",
            "a/b/cpu.max": "max 100000",
            "a/b/memory.max": "1073741824",
        },
    )
    proc = _tree(tmp_path, {"self.cgroup": "0::/a/b\n"}) / "self.cgroup"
    out = cgroup_limits(str(root), str(proc))
    assert out["cpu_quota"] == 0.5 and out["cpus_usable"] == 1 and out["memory_limit_gib"] == 1.0


def test_cgroup_v1_and_unlimited(tmp_path: Path) -> None:
    root = _tree(
        tmp_path / "cg",
        {
            "cpu,cpuacct/docker/x/cpu.cfs_quota_us": "250000",
            "cpu,cpuacct/docker/x/cpu.cfs_period_us": "100000",
            "memory/docker/x/memory.limit_in_bytes": "9223372036854771712",
        },
    )
    proc = _tree(tmp_path, {"self.cgroup": "4:memory:/docker/x\n3:cpu,cpuacct:/docker/x\n"}) / "self.cgroup"
    out = cgroup_limits(str(root), str(proc))
    assert out["version"] == 1 and out["cpu_quota"] == 2.5 and out["memory_limit_bytes"] == "max"
    assert out["cpus_usable"] == min(3, len(os.sched_getaffinity(0)))


def test_cgroup_limits_for_real_in_a_child_cgroup() -> None:
    """A child process placed in a real cgroup with 1 CPU and 3 GiB reads exactly those limits."""
    lines = Path("/proc/self/cgroup").read_text().splitlines()
    paths = {c: p for _, cs, p in (line.split(":", 2) for line in lines) for c in cs.split(",")}
    name = f"envcheck-test-{uuid.uuid4().hex[:8]}"
    if "memory" in paths and Path("/sys/fs/cgroup/memory").is_dir():  # v1
        base = [
            Path("/sys/fs/cgroup/memory") / paths["memory"].lstrip("/"),
            Path("/sys/fs/cgroup/cpu") / paths.get("cpu", "/").lstrip("/"),
        ]
        made = [b / name for b in base]
        writes = [(made[0] / "memory.limit_in_bytes", "3221225472"), (made[1] / "cpu.cfs_quota_us", "100000")]
    else:  # v2
        made = [Path("/sys/fs/cgroup") / paths[""].lstrip("/") / name]
        writes = [(made[0] / "memory.max", "3221225472"), (made[0] / "cpu.max", "100000 100000")]
    try:
        for folder in made:
            folder.mkdir()
    except OSError as exc:
        for folder in made:
            if folder.is_dir():
                folder.rmdir()
        pytest.skip(f"cannot create a cgroup here ({exc.strerror}); the crafted-tree tests cover the parsing")
    try:
        for path, value in writes:
            try:
                path.write_text(value)
            except (
                OSError
            ) as exc:  # seen on the H100 proof host: the controller is not delegated to this subtree
                pytest.skip(
                    f"cannot set {path.name} here ({exc.strerror}); the crafted-tree tests cover the parsing"
                )
        join = "; ".join(f"echo $$ > {folder}/cgroup.procs" for folder in made)
        code = (
            "from envcheck.probe.facts import cgroup_limits; import json; print(json.dumps(cgroup_limits()))"
        )
        done = subprocess.run(
            ["sh", "-c", f'{join} && exec "$0" -c "$1"', sys.executable, code],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        if done.returncode != 0 and "cgroup.procs" in done.stderr:
            pytest.skip(f"cannot join the cgroup: {done.stderr.strip()}")
        import json

        out = json.loads(done.stdout)
        assert out["cpu_quota"] == 1.0 and out["cpus_usable"] == 1 and out["memory_limit_gib"] == 3.0, out
    finally:
        for folder in made:
            folder.rmdir()  # the child has exited, so the cgroup is empty


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
