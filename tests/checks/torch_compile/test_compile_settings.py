"""How the compile checks set Inductor's compile threads (envcheck.checks.torch_compile.settings): the rule per host
size and GPU, and, for real, that two threads compile a CPU graph's kernels without starting any worker process."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from envcheck.checks.torch_compile import settings
from tests.helpers import ROOT, no_gpu_env


@pytest.mark.parametrize(
    ("cores", "gpu", "threads"),
    [
        (2, False, 2),  # threads that wait for g++ while this lane traces
        (2, True, 1),  # a second thread would start Inductor's process pool for Triton
        (7, False, 2),
        (8, True, 4),  # cores to spare
        (64, False, 8),
    ],
)
def test_thread_settings_by_host_and_gpu(
    monkeypatch: pytest.MonkeyPatch, cores: int, gpu: bool, threads: int
) -> None:
    monkeypatch.setattr(settings, "_CORES", cores)
    assert settings.thread_settings(gpu) == {"compile_threads": threads}


PROGRAM = textwrap.dedent("""
    import os, sys
    import torch
    from torch._inductor import config
    from envcheck.checks.torch_compile.settings import apply_settings
    applied = apply_settings(probe_isa=False)
    assert {key: getattr(config, key) for key in applied} == applied, applied
    from envcheck.checks.torch_compile.inductor import TOLERANCE
    f = torch.compile(lambda x: torch.relu(torch.sin(x) * 2).sum(-1))
    x = torch.randn(64, 64, generator=torch.Generator().manual_seed(0))
    got, want = f(x), torch.relu(torch.sin(x) * 2).sum(-1)
    # compile.inductor's own rule for "matches eager", relative to the output's scale. assert_close's float32
    # default failed once in CI: 1.8e-3 off on sums near 40, where 300 other inputs here were at most 1.5e-5 off
    diff = float((got - want).abs().max() / (1 + want.abs().max()))
    assert diff <= TOLERANCE, diff
    def parent(pid):
        try:  # the name in parentheses may hold any character; the fields after its last ")" are fixed
            return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1]
        except OSError:  # another test's process that ended between the listing and this read
            return None
    kids = [p for p in os.listdir("/proc") if p.isdigit() and parent(p) == str(os.getpid())]
    print(applied["compile_threads"], len(kids))
""")


@pytest.mark.long
def test_two_threads_compile_a_cpu_graph_and_start_no_process(tmp_path: Path) -> None:
    """Real Inductor, real g++: the settings as a 2-core host without a GPU gets them; after the compile this
    process has no child left (no compile-worker pool, whose start would import torch again)."""
    if settings._CORES >= 8:
        pytest.skip("a host with 8 cores or more gets Inductor's worker processes")
    env = {**no_gpu_env(), "PYTHONPATH": str(ROOT), "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache")}
    env["TMPDIR"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=600, cwd=ROOT, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["2", "0"], done.stdout
