"""The torch.compile points of PyTorch's release smoke test (smoke_test_compile): compile.toolchain (the quick run's
"can torch.compile work here", probes only), compile.cpu_isa (the vectorized ISA Inductor picks) and
compile.max_autotune (mode="max-autotune" of the smoke test's Net), each with its faults produced for real here and
its healthy twin: no C++ compiler (CXX pointing nowhere, PATH emptied), a noexec temp dir (a tmpfs in a private mount
namespace that dies with the run), ATEN_CPU_CAPABILITY=default (the documented switch that turns Inductor's
vectorization off). The GPU halves run in the GPU proof (tests/checks/test_smoke_parity.py, `-m gpu`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envcheck.core.result import Result, Status
from tests.helpers import ROOT, no_gpu_env

# long: real compiles that keep a core busy for minutes in all; `make test` runs them in its `long` stream
pytestmark = pytest.mark.long


def run(check: str, tmp_path: Path, env: dict[str, str], mounts: str = "", level: str = "full") -> Result:
    """`envcheck run --only CHECK` as a user runs it, after `mounts` in a private mount namespace; the one result."""
    report = tmp_path / f"{check}.json"
    cli = [
        sys.executable,
        "-m",
        "envcheck",
        "run",
        "--only",
        check,
        "--allow-cpu",
        "--level",
        level,
        "--json",
        str(report),
    ]
    if mounts:
        if os.geteuid() != 0 or shutil.which("unshare") is None:
            pytest.skip("needs root and unshare to mount a private noexec tmpfs")
        cli = [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "bash",
            "-c",
            f'set -e; {mounts}; exec "$@"',
            "bash",
            *cli,
        ]
    done = subprocess.run(
        cli, capture_output=True, text=True, timeout=400, cwd=ROOT, env={**env, "PYTHONPATH": str(ROOT)}
    )
    assert report.exists(), f"no report (rc {done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    (result,) = json.loads(report.read_text())["results"]
    return Result.from_dict(result)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """No GPU, a cold Inductor cache of the test's own (removed with tmp_path)."""
    return {**no_gpu_env(), "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"), "TMPDIR": str(tmp_path)}


def no_compiler(tmp_path: Path, env: dict[str, str]) -> dict[str, str]:
    empty = tmp_path / "bin"
    empty.mkdir()
    return {**env, "CXX": "/nonexistent/g++", "CC": "/nonexistent/gcc", "PATH": str(empty)}


def test_the_light_inductor_lookups_equal_inductors_own() -> None:
    """compile.toolchain computes Inductor's default cache dir and compiler search without importing Inductor;
    they must stay what Inductor itself says."""
    import torch._inductor.config as config
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    from envcheck.checks.torch_compile import toolchain

    assert toolchain.default_cache_dir() == default_cache_dir()
    assert toolchain.cxx_search() == tuple(config.cpp.cxx)


def test_toolchain_says_compile_can_work_on_a_healthy_host(tmp_path: Path, env: dict[str, str]) -> None:
    result = run("compile.toolchain", tmp_path, env, level="quick")
    assert result.status is Status.PASS, result.summary
    assert result.summary.startswith("torch.compile can work here: ") and "answers" in result.summary
    assert result.measured["cxx"] and result.measured["python_headers"] is True
    assert not (tmp_path / "inductor").exists()  # nothing compiled, nothing cached


def test_toolchain_names_a_missing_compiler_in_the_quick_run(tmp_path: Path, env: dict[str, str]) -> None:
    result = run("compile.toolchain", tmp_path, no_compiler(tmp_path, env), level="quick")
    assert (
        result.status is Status.FAIL
        and result.fault_class == "image"
        and result.code == "compile.no_compiler"
    )
    assert "no working C++ compiler" in result.summary and "/nonexistent/g++" in result.summary
    assert "CXX" in (result.remediation or "")


def test_toolchain_names_a_noexec_temp_dir(tmp_path: Path, env: dict[str, str]) -> None:
    mnt = tmp_path / "noexec"
    mnt.mkdir()
    result = run(
        "compile.toolchain",
        tmp_path,
        {**env, "TMPDIR": str(mnt), "TORCHINDUCTOR_CACHE_DIR": str(mnt / "c")},
        f"mount -t tmpfs -o noexec tmpfs {mnt}",
        level="quick",
    )
    assert (
        result.status is Status.FAIL
        and result.fault_class == "config"
        and result.code == "compile.dir_unusable"
    )
    assert "noexec" in result.summary and str(mnt) in result.summary


def test_toolchain_warns_when_vectorization_is_switched_off(tmp_path: Path, env: dict[str, str]) -> None:
    result = run("compile.toolchain", tmp_path, {**env, "ATEN_CPU_CAPABILITY": "default"}, level="quick")
    assert (
        result.status is Status.WARN
        and result.fault_class == "config"
        and result.code == "compile.isa_disabled"
    )


def test_cpu_isa_names_the_isa_inductor_picks(tmp_path: Path, env: dict[str, str]) -> None:
    result = run("compile.cpu_isa", tmp_path, env)
    assert result.status is Status.PASS, result.summary
    assert result.measured["isa"].startswith("Vec") and result.measured["bit_width"] in (128, 256, 512)
    assert result.summary == (
        f"Inductor vectorizes CPU kernels with {result.measured['isa']} ({result.measured['bit_width']}-bit)"
    )


@pytest.fixture(scope="module")
def probe_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One Inductor cache for the three capability settings below: the probe binaries in it are the same for each
    (a probe's file is named by its source, the compiler, the ISA's flags and torch's version, and whether it builds
    and loads does not depend on ATEN_CPU_CAPABILITY), so the first setting builds them and the others reuse them, as
    Inductor does. The first setting's own pick runs before Inductor's, so it builds its probe cold."""
    return tmp_path_factory.mktemp("probe-cache")


@pytest.mark.parametrize("capability", [None, "avx2", "default"])
def test_the_one_probe_pick_is_inductors_own(
    tmp_path: Path, probe_cache: Path, capability: str | None
) -> None:
    """compile.cpu_isa builds only the ISA it selects (Inductor's own pick builds a probe for every ISA the
    CPU claims, 8-10 s cold here, a minute on torch 2.11's H100 host); the selection must stay Inductor's, in
    a fresh interpreter (Inductor's list cached from an earlier pick would make it Inductor's by
    construction). The probes on disk may be warm: the selection is made again in each interpreter."""
    code = (
        "from envcheck.checks.torch_compile.settings import pick\n"
        "from torch._inductor.cpu_vec_isa import pick_vec_isa, valid_vec_isa_list\n"
        "ours = pick(); assert valid_vec_isa_list.cache_info().currsize == 0, 'pick() built the whole list'\n"
        "theirs = pick_vec_isa(); print(ours, (type(theirs).__name__ if theirs else None, theirs.bit_width()))"
    )
    env = {**no_gpu_env(), "TORCHINDUCTOR_CACHE_DIR": str(probe_cache), "TMPDIR": str(tmp_path)}
    env.pop("ATEN_CPU_CAPABILITY", None)
    if capability:
        env["ATEN_CPU_CAPABILITY"] = capability
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT, env=env
    )
    assert done.returncode == 0, done.stderr[-2000:]
    ours, theirs = done.stdout.strip().rsplit(") (", 1)
    assert ours + ")" == "(" + theirs, done.stdout


def test_cpu_isa_switched_off_is_config(tmp_path: Path, env: dict[str, str]) -> None:
    result = run("compile.cpu_isa", tmp_path, {**env, "ATEN_CPU_CAPABILITY": "default"})
    assert (
        result.status is Status.WARN
        and result.fault_class == "config"
        and result.code == "compile.isa_disabled"
    )
    assert result.measured["isa"] is None


def test_cpu_isa_without_a_compiler_names_the_compiler(tmp_path: Path, env: dict[str, str]) -> None:
    """Inductor proves each ISA by compiling a probe: no compiler, no ISA; the cause is the compiler, not the CPU."""
    result = run("compile.cpu_isa", tmp_path, no_compiler(tmp_path, env))
    assert (
        result.status is Status.FAIL
        and result.fault_class == "image"
        and result.code == "compile.no_compiler"
    )
    assert "probes cannot compile" in result.summary


def test_cpu_isa_verdict_for_a_cpu_without_vector_units() -> None:
    """Staged (this CPU has AVX-512): a CPU whose flags list no ISA Inductor supports is named, as a warning."""
    from envcheck.checks.torch_compile.isa import cpu_flags, isa_verdict

    flags = cpu_flags("processor\t: 0\nflags\t\t: fpu vme sse sse2 ssse3 sse4_1 sse4_2\n")
    got = isa_verdict(None, 0, flags, None, None)
    assert flags == [] and got.status is Status.WARN and got.fault_class == "node"
    assert got.code == "compile.no_vec_isa"
    assert cpu_flags("flags\t: sse2 avx2 avx512f\n") == ["avx2", "avx512f"]


def test_max_autotune_compiles_the_smoke_tests_net(tmp_path: Path, env: dict[str, str]) -> None:
    result = run("compile.max_autotune", tmp_path, env)
    assert result.status is Status.PASS, (result.summary, result.details)
    cpu = result.measured["devices"]["cpu"]
    assert cpu["compile_s"] > 0 and cpu["max_rel_diff"] <= 1e-3


def test_max_autotune_without_a_compiler_names_it(tmp_path: Path, env: dict[str, str]) -> None:
    result = run("compile.max_autotune", tmp_path, no_compiler(tmp_path, env))
    assert (
        result.status is Status.FAIL
        and result.fault_class == "image"
        and result.code == "compile.no_compiler"
    )
    assert result.summary.startswith(
        "torch.compile(mode='max-autotune') fails on cpu: no working C++ compiler"
    )


def test_max_autotune_wrong_results_are_the_images() -> None:
    """Staged: a compiled result off by more than the tolerance."""
    from envcheck.checks.torch_compile.autotune import autotune_verdict

    got = autotune_verdict(
        {"cpu": {"compile_s": 5.0, "max_rel_diff": 0.0}, "cuda:0": {"compile_s": 9.0, "max_rel_diff": 0.5}}
    )
    assert (
        got.status is Status.FAIL and got.fault_class == "image" and got.code == "compile.max_autotune_wrong"
    )
    assert "cuda:0" in got.summary
