"""Where a cold Inductor compile of compile.inductor's graph goes, under each compile setting (prints figures).

    python bench/compile_phases.py [--repeat 2] [--python PATH] [--variants default,threads1,threads16,check]

Each run is a fresh interpreter with empty TMPDIR and TORCHINDUCTOR_CACHE_DIR (a cold cache, precompiled
header included) that compiles the check's function (sin * w, sum, relu; fwd + bwd) on CPU. The C++ compiler
is wrapped (CXX) to count its invocations and add up their seconds: the ISA probes, the precompiled header
and the kernels. Variants:
  default    torch's own settings (compile_threads = min(32, cpu count): a compile-worker pool when > 1)
  threads1   compile_threads = 1 (in-process compile, what the check once set on every host)
  threads16  compile_threads = 16 (a 16-core host's default, simulated on any host)
  check      what compile.inductor sets now (envcheck.checks.torch_compile.settings.apply_settings)
Prints wall, first-call (fwd compile) and backward seconds, g++ count and seconds, with the load average;
medians over --repeat. Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = {
    "default": {},
    "threads1": {"compile_threads": 1},
    "threads16": {"compile_threads": 16},
    "check": None,
}
PROGRAM = textwrap.dedent("""
    import json, os, sys, time
    import torch
    from torch._inductor import config
    settings = json.loads(sys.argv[1])
    if settings is None:
        from envcheck.checks.torch_compile.settings import apply_settings
        apply_settings(probe_isa=False)
    else:
        for key, value in settings.items():
            setattr(config, key, value)
    def f(x, w):
        return torch.relu((torch.sin(x) * w).sum(dim=-1))
    x, w = torch.randn(256, 512, requires_grad=True), torch.randn(512, requires_grad=True)
    compiled = torch.compile(f, backend="inductor", dynamic=False, fullgraph=True)
    t0 = time.perf_counter(); y = compiled(x, w); t1 = time.perf_counter(); y.sum().backward()
    t2 = time.perf_counter()
    print(json.dumps({"fwd": t1 - t0, "bwd": t2 - t1, "threads": config.compile_threads}))
""")
WRAPPER = textwrap.dedent("""\
    #!{python}
    import os, subprocess, sys, time
    t = time.perf_counter(); rc = subprocess.call(["{cxx}", *sys.argv[1:]])
    with open(os.environ["COMPILE_BENCH_LOG"], "a") as log:
        log.write(f"{{time.perf_counter() - t}}\\n")
    sys.exit(rc)
""")


def one_run(python: str, settings: dict[str, object] | None, cxx: str) -> dict[str, float]:
    """One cold compile in a fresh interpreter and fresh dirs."""
    with tempfile.TemporaryDirectory(prefix="compile-phases-") as tmp:
        wrapper, log = Path(tmp) / "cxx", Path(tmp) / "cxx.log"
        wrapper.write_text(WRAPPER.format(python=sys.executable, cxx=cxx))
        wrapper.chmod(0o755)
        env = {
            **os.environ,
            "TMPDIR": tmp,
            "TORCHINDUCTOR_CACHE_DIR": os.path.join(tmp, "inductor"),
            "CXX": str(wrapper),
            "COMPILE_BENCH_LOG": str(log),
            "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        }
        env.pop("TORCHINDUCTOR_COMPILE_THREADS", None)
        began = time.perf_counter()
        proc = subprocess.run(
            [python, "-c", PROGRAM, json.dumps(settings)],
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        wall = time.perf_counter() - began
        if proc.returncode != 0:
            raise RuntimeError((proc.stderr.strip().splitlines() or ["?"])[-1])
        inner = json.loads(proc.stdout.strip().splitlines()[-1])
        cxx_runs = [float(x) for x in log.read_text().split()] if log.exists() else []
    return {
        "wall": wall,
        "fwd": inner["fwd"],
        "bwd": inner["bwd"],
        "threads": inner["threads"],
        "cxx_n": len(cxx_runs),
        "cxx_s": sum(cxx_runs),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--cxx", default="g++")
    args = parser.parse_args()
    cxx = (
        subprocess.run(
            ["sh", "-c", f"command -v {args.cxx}"], capture_output=True, text=True, check=False
        ).stdout.strip()
        or args.cxx
    )
    print(f"python {args.python}, {os.cpu_count()} cores, C++ compiler {cxx}")
    rows: dict[str, list[dict[str, float]]] = {}
    for _ in range(args.repeat):
        for name in args.variants.split(","):
            figures = one_run(args.python, VARIANTS[name], cxx)
            rows.setdefault(name, []).append(figures)
            print(
                f"  {name:10s} wall {figures['wall']:6.1f} s  fwd {figures['fwd']:6.1f} s  bwd {figures['bwd']:5.1f} s"
                f"  g++ x{figures['cxx_n']:.0f} {figures['cxx_s']:6.1f} s  threads {figures['threads']}"
                f"  (load {os.getloadavg()[0]:.2f})",
                flush=True,
            )
    print("medians:")
    for name, runs in rows.items():
        med = {k: statistics.median(r[k] for r in runs) for k in ("wall", "fwd", "bwd", "cxx_s")}
        print(
            f"  {name:10s} wall {med['wall']:6.1f} s  fwd {med['fwd']:6.1f} s  bwd {med['bwd']:5.1f} s  "
            f"g++ {med['cxx_s']:6.1f} s  (n={len(runs)})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
