"""compile.inductor: a healthy host passes; each toolchain fault, produced for real here, is named with its fix.

The CPU faults (noexec or read-only dirs, no compiler, no Python headers) really break torch.compile on this
machine, in a private mount namespace that dies with the test's process. The GPU-only faults (libcuda, ptxas)
cannot happen without a GPU: their tests feed the diagnosis the real error texts of public issues (simulated).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from envcheck.checks.torch_compile import toolchain as probes
from envcheck.checks.torch_compile.causes import Evidence, classify, first_line
from envcheck.core.result import Result, Status
from tests.helpers import ROOT, no_gpu_env, run_check

# long: real compiles that keep a core busy for minutes in all; `make test` runs them in its `long` stream
pytestmark = pytest.mark.long


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A temp dir removed at the end (mount points inside it are gone with their namespace by then)."""
    with tempfile.TemporaryDirectory(prefix="envcheck-compile-") as d:
        yield Path(d)


def _namespaces() -> None:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare to mount a private noexec/ro tmpfs")
    if subprocess.run(["unshare", "--mount", "true"], capture_output=True, timeout=10).returncode != 0:
        pytest.skip("unshare --mount is not permitted here (no CAP_SYS_ADMIN)")


def run_isolated(scratch: Path, env: dict[str, str], mounts: str = "") -> Result:
    """Run `envcheck run --only compile.inductor` as a user would, after `mounts` in a private mount namespace."""
    report = scratch / "report.json"
    cli = [
        sys.executable,
        "-m",
        "envcheck",
        "run",
        "--only",
        "compile.inductor",
        "--allow-cpu",
        "--level",
        "full",
        "--json",
        str(report),
    ]
    argv = (
        cli
        if not mounts
        else [
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
    )
    env = {**env, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=400, env=env, cwd=ROOT)
    assert report.exists(), f"no report (rc {done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    (result,) = json.loads(report.read_text())["results"]
    return Result.from_dict(result)


def _env(**changes: str | None) -> dict[str, str]:
    env = no_gpu_env()
    for key, value in changes.items():
        env.pop(key, None)
        if value is not None:
            env[key] = value
    return env


def test_healthy_host_passes_and_reports_figures(scratch: Path) -> None:
    """A cold cache (fresh TMPDIR and TORCHINDUCTOR_CACHE_DIR) and CXX a wrapper script around g++ (as on the
    H100 host of docs/gpu-evidence, whose g++ wraps `g++-real`): it compiles, and leaves nothing behind. The ~150 MB
    precompiled header Inductor writes under $TMPDIR/torchinductor_$USER (the compile checks share it:
    about twenty kernels pay it back) goes in the worker's private temp dir and leaves with the run."""
    cache, tmp = scratch / "inductor", scratch / "tmp"
    tmp.mkdir()
    wrapper = scratch / "gxx"
    wrapper.write_text(f'#!/bin/sh\nexec {shutil.which("g++") or "g++"} "$@"\n')
    wrapper.chmod(0o755)
    result = run_check(
        "compile.inductor",
        env={**no_gpu_env(), "TORCHINDUCTOR_CACHE_DIR": str(cache), "TMPDIR": str(tmp), "CXX": str(wrapper)},
    )
    assert result.status is Status.PASS, (result.summary, result.details)
    cpu = result.measured["devices"]["cpu"]
    assert cpu["compile_s"] > 0 and cpu["compiled_ms"] > 0 and cpu["eager_ms"] > 0
    assert cpu["compiled_vs_eager"] > 0 and cpu["max_rel_diff"] <= 1e-4
    assert cpu["compile_phases_s"]["code_gen"] > 0
    assert result.measured["cxx"]
    assert list(cache.rglob("*.so")) and not list(
        scratch.rglob("*.pch")
    )  # compiled; the header went with the run
    assert result.measured["dirs"]["temp dir"] == str(
        tmp
    )  # the probes name the user's dirs, not the private one
    assert result.measured["dirs"]["Inductor cache"] == str(
        cache
    )  # the user's cache is used, and kept (above)
    assert list(tmp.iterdir()) == [], "the compile left something in the user's temp dir"


@pytest.mark.parametrize("variable", ["TMPDIR", "TORCHINDUCTOR_CACHE_DIR"])
def test_noexec_dir_is_named_with_the_variable_that_moves_it(scratch: Path, variable: str) -> None:
    _namespaces()
    mnt = scratch / "noexec"
    mnt.mkdir()
    result = run_isolated(
        scratch,
        _env(**{"TORCHINDUCTOR_CACHE_DIR": None, variable: str(mnt)}),
        f"mount -t tmpfs -o noexec tmpfs {mnt}",
    )
    assert result.status is Status.FAIL, result.summary
    assert "noexec" in result.summary and str(mnt) in result.summary
    assert result.fault_class == "config"
    assert "TORCHINDUCTOR_CACHE_DIR" in (
        result.remediation or ""
    )  # the compiled .so lives in Inductor's cache
    if variable == "TMPDIR":
        assert "TMPDIR" in (result.remediation or "")


def test_read_only_cache_dir_is_named(scratch: Path) -> None:
    _namespaces()
    mnt = scratch / "ro"
    mnt.mkdir()
    result = run_isolated(
        scratch, _env(TORCHINDUCTOR_CACHE_DIR=str(mnt)), f"mount -t tmpfs -o ro tmpfs {mnt}"
    )
    assert result.status is Status.FAIL, result.summary
    assert "read-only" in result.summary and str(mnt) in result.summary
    assert result.fault_class == "config"
    assert "export TORCHINDUCTOR_CACHE_DIR=" in (result.remediation or "")


def test_missing_compiler_names_what_was_looked_for(scratch: Path) -> None:
    empty = scratch / "bin"
    empty.mkdir()
    result = run_isolated(
        scratch,
        _env(
            CXX="/nonexistent/g++",
            CC="/nonexistent/gcc",
            PATH=str(empty),
            TORCHINDUCTOR_CACHE_DIR=str(scratch / "cache"),
        ),
    )
    assert result.status is Status.FAIL, result.summary
    assert "no working C++ compiler" in result.summary and "/nonexistent/g++" in result.summary
    assert "CXX=/nonexistent/g++" in result.summary and "CXX" in (result.remediation or "")
    assert result.fault_class == "image"


def test_missing_python_headers_are_named(scratch: Path) -> None:
    _namespaces()
    include = sysconfig.get_paths()["include"]
    if not Path(include, "Python.h").exists():
        pytest.skip(f"this interpreter has no Python.h in {include} to hide")
    # a cold Inductor cache, so the kernels really compile (a warm one would never include Python.h)
    result = run_isolated(
        scratch, _env(TORCHINDUCTOR_CACHE_DIR=str(scratch / "cache")), f"mount -t tmpfs -o ro tmpfs {include}"
    )
    assert result.status is Status.FAIL, result.summary
    assert "Python headers are missing" in result.summary and include in result.summary
    assert result.fault_class == "image"
    assert "python{}.{}-dev".format(*sys.version_info[:2]) in (result.remediation or "")


def test_probes_see_a_real_noexec_and_read_only_mount(scratch: Path) -> None:
    _namespaces()
    code = (
        "import sys; from envcheck.checks.torch_compile.toolchain import dir_problems; "
        "print(dir_problems(sys.argv[1])); print(dir_problems(sys.argv[2] + '/not/yet/made'))"
    )
    ne, ro = scratch / "ne", scratch / "ro"
    ne.mkdir(), ro.mkdir()
    done = subprocess.run(
        [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "bash",
            "-c",
            f"mount -t tmpfs -o noexec tmpfs {ne} && mount -t tmpfs -o ro tmpfs {ro} && "
            f'exec {sys.executable} -c "{code}" {ne} {ro}',
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    noexec, readonly = done.stdout.splitlines()
    assert "noexec" in noexec and "read-only" not in noexec
    assert "read-only" in readonly and str(ro) in readonly


# GPU-only causes, simulated: the exception text is the real one from a public issue; no GPU is involved.
# https://github.com/pytorch/pytorch/issues/107960 (T4, torch.compile of torch.sin)
LIBCUDA_ASSERT = (
    "BackendCompilerFailed: backend='inductor' raised:\nAssertionError: libcuda.so cannot found!\n"
)
# https://github.com/pytorch/pytorch/issues/92745 (older Triton linking its launcher with -lcuda)
LIBCUDA_LD = (
    "CalledProcessError: Command '['/usr/bin/gcc', '/tmp/tmp0zvqksim/main.c', '-O3', '-shared', '-fPIC', "
    "'-lcuda']' returned non-zero exit status 1.\n/usr/bin/ld: cannot find -lcuda\n"
    "collect2: error: ld returned 1 exit status"
)
# https://github.com/triton-lang/triton/issues/8539 (DGX Spark, GB10)
PTXAS = (
    "triton.runtime.errors.PTXASError: PTXAS error: Internal Triton PTX codegen error\n`ptxas` stderr:\n"
    "ptxas fatal   : Value 'sm_121a' is not defined for option 'gpu-name'\n"
)


@pytest.mark.parametrize("text", [LIBCUDA_ASSERT, LIBCUDA_LD])
def test_libcuda_not_found_is_named_simulated(text: str) -> None:
    cause = classify(text, Evidence(libcuda_found=("/usr/lib/x86_64-linux-gnu/libcuda.so.1",)))
    assert "cannot find the driver library libcuda.so" in cause.summary
    assert "libcuda.so.1" in cause.summary  # what ldconfig -p listed
    assert "TRITON_LIBCUDA_PATH" in cause.fix and "ldconfig" in cause.fix
    assert cause.fault_class == "config"


def test_ptxas_without_the_gpu_arch_is_named_simulated() -> None:
    cause = classify(PTXAS, Evidence())
    assert "ptxas does not know the GPU's architecture sm_121a" in cause.summary
    assert "TRITON_PTXAS_PATH" in cause.fix
    assert cause.fault_class == "image"


def test_ptxas_probe_reads_the_allowed_archs(scratch: Path) -> None:
    """A stand-in ptxas (a script; the real one needs a CUDA toolkit) whose --help lists archs like CUDA 12.4's."""
    fake = scratch / "ptxas"
    fake.write_text(
        "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'Cuda compilation tools, release 12.4, V12.4.131';"
        " else echo \"Allowed values for this option:  'sm_50','sm_80','sm_89','sm_90','sm_90a'.\"; fi\n"
    )
    fake.chmod(0o755)
    assert probes.ptxas_arch_problem(str(fake), "sm_90a") is None
    problem = probes.ptxas_arch_problem(str(fake), "sm_120")
    assert problem is not None and "CUDA 12.4" in problem and "sm_120" in problem


def test_anything_else_gives_the_first_real_line_never_reinstall() -> None:
    text = (
        "InductorError: LoweringException: NotImplementedError: no lowering for aten.foo\n\n"
        "Set TORCHDYNAMO_VERBOSE=1 for the internal stack trace"
    )
    cause = classify(text, Evidence())
    assert cause.summary.startswith("InductorError: LoweringException") and not cause.named
    assert "reinstall" not in cause.fix
    assert first_line("\nSet TORCHDYNAMO_VERBOSE=1 for more\nOSError: boom") == "OSError: boom"


def test_probes_alone_name_a_likely_cause_when_the_error_names_none() -> None:
    from envcheck.checks.torch_compile.causes import preflight_cause
    from envcheck.checks.torch_compile.toolchain import Compiler

    gpu_host = Evidence(cc=Compiler("C compiler (Triton helpers, GPU)", ("gcc",), "/usr/bin/gcc"))
    cause = preflight_cause(gpu_host)  # simulated: a GPU host whose ldconfig -p lists no libcuda.so
    assert cause is not None and "libcuda.so" in cause.summary and "TRITON_LIBCUDA_PATH" in cause.fix
    assert preflight_cause(Evidence()) is None


@pytest.mark.gpu
def test_each_gpu_model_compiles_and_reports_figures() -> None:
    import torch

    from envcheck.reference.devices import gpu_model, torch_index

    result = run_check("compile.inductor")
    assert result.status is Status.PASS, (result.summary, result.details)
    gpus = [d for d in result.measured["devices"] if d != "cpu"]
    # one GPU of each model (envcheck.reference.devices; which one is the worker's choice, by NVML's view of use)
    assert sorted(gpu_model(torch_index(d)) for d in gpus) == sorted(
        {gpu_model(i) for i in range(torch.cuda.device_count())}
    )
    for device in gpus:
        figures = result.measured["devices"][device]
        assert figures["compile_s"] > 0 and figures["max_rel_diff"] <= 1e-4
    assert result.measured["libcuda"] or result.measured["triton_libcuda_path"]


# https://github.com/RosettaCommons/foundry/issues/221 (a docker image without cc; Triton builds its launcher)
TRITON_NO_CC = (
    "RuntimeError: Failed to find C compiler. Please specify via CC environment variable or set "
    "triton.knobs.build.impl."
)


def test_triton_without_a_c_compiler_is_named_simulated(monkeypatch: pytest.MonkeyPatch) -> None:
    from envcheck.checks.torch_compile.toolchain import Compiler

    monkeypatch.delenv("CC", raising=False)
    cause = classify(
        TRITON_NO_CC, Evidence(cc=Compiler("C compiler (Triton helpers, GPU)", ("gcc", "clang")))
    )
    assert "no working C compiler (Triton helpers, GPU): looked for gcc, clang (CC=unset)" in cause.summary
    assert "export CC=" in cause.fix


def test_c_compiler_probe_follows_cc_for_real(monkeypatch: pytest.MonkeyPatch, scratch: Path) -> None:
    monkeypatch.setenv("CC", "/nonexistent/gcc")
    assert probes.c_compiler() == probes.Compiler("C compiler (Triton helpers, GPU)", ("/nonexistent/gcc",))
    monkeypatch.delenv("CC")
    monkeypatch.setenv("PATH", str(scratch))
    assert probes.c_compiler().found is None
    monkeypatch.setenv("PATH", os.path.dirname(shutil.which("gcc", path=os.defpath) or "/usr/bin/gcc"))
    found = probes.c_compiler().found
    assert found is not None and found.endswith("gcc")
