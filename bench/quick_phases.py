"""Where a quick run's wall time goes: each phase timed in a fresh interpreter (prints figures, asserts nothing).

    python bench/quick_phases.py            # on a GPU host, or anywhere (CUDA phases say "no GPU")

Phases: a bare `import torch`; CUDA init (first tensor on each GPU); `import torchvision` and
`import torch._dynamo` (which torchvision pulls in: the quick checks must import neither, and the checks'
phase names any heavy module they did import); collecting the facts; the importlib.metadata look-ups; a
2-worker DataLoader with fork and with spawn workers (what container.limits pays); each quick check called in-process after torch and CUDA are up; and the
whole `envcheck run --level quick` from the command line (`--allow-cpu` where there is no GPU).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PHASES = {
    "import torch": "import torch",
    "CUDA init (all GPUs)": "import torch\nt=time.perf_counter()\n"
    "[torch.ones(1, device=f'cuda:{i}').sum().item() for i in range(torch.cuda.device_count())]"
    "\nprint(json.dumps(time.perf_counter()-t))\nraise SystemExit",
    "import torchvision (after torch)": "import torch\nt=time.perf_counter()\nimport torchvision\n"
    "print(json.dumps(time.perf_counter()-t))\nraise SystemExit",
    "import torch._dynamo (after torch)": "import torch\nt=time.perf_counter()\nimport torch._dynamo\n"
    "print(json.dumps(time.perf_counter()-t))\nraise SystemExit",
    "facts (after torch)": "import torch\nfrom envcheck.probe.facts import collect_facts\nt=time.perf_counter()\n"
    "collect_facts()\nprint(json.dumps(time.perf_counter()-t))\nraise SystemExit",
    "metadata look-ups (after torch)": "import torch, importlib.metadata as m\nt=time.perf_counter()\n"
    "m.version('torchvision'); m.requires('torchvision')\n"
    "print(json.dumps(time.perf_counter()-t))\nraise SystemExit",
}
LOADER = """
import torch
from torch.utils.data import DataLoader, Dataset
class D(Dataset):
    def __len__(self): return 8
    def __getitem__(self, i): return torch.full((4,), float(i))
if __name__ == "__main__":
    if torch.cuda.is_available(): torch.ones(1, device='cuda').sum().item()
    t = time.perf_counter()
    n = sum(1 for _ in DataLoader(D(), batch_size=None, num_workers=2, multiprocessing_context=%r,
                                  pin_memory=torch.cuda.is_available()))
    print(json.dumps(time.perf_counter() - t))
"""
CHECKS = """
import sys
import torch
from envcheck.checks.check_registry import registry
from envcheck.core.check import Context, Level
from envcheck.core.execute import execute
if torch.cuda.is_available(): torch.ones(1, device='cuda').sum().item()
out = {}
for spec in registry().values():
    if spec.level is Level.QUICK and not spec.name.startswith(("dist.", "image.")):
        t = time.perf_counter(); r = execute(spec, Context(allow_cpu=not torch.cuda.is_available()))
        out[spec.name] = [round(time.perf_counter() - t, 3), r.status.value]
out["heavy modules imported"] = [m for m in ("torch._dynamo", "torch._inductor", "torchvision") if m in sys.modules]
print(json.dumps(out))
raise SystemExit
"""


def timed(code: str) -> tuple[float, object]:
    """Wall time of a fresh interpreter running `code`, and what it printed as JSON (if anything)."""
    with tempfile.TemporaryDirectory() as tmp:  # a file, not -c: spawned DataLoader workers re-import it
        script = Path(tmp) / "phase.py"
        script.write_text("import json, time\n" + code)
        began = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, str(script)],
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
            cwd=Path(__file__).resolve().parents[1],
        )
        wall = time.perf_counter() - began
    if proc.returncode != 0:
        return wall, f"failed: {(proc.stderr.strip().splitlines() or ['?'])[-1]}"
    lines = proc.stdout.strip().splitlines()  # checks may print; the figures are the last line
    return wall, json.loads(lines[-1]) if lines else None


def main() -> int:
    for name, code in {
        **PHASES,
        "DataLoader fork (after CUDA)": LOADER % "fork",
        "DataLoader spawn (after CUDA)": LOADER % "spawn",
    }.items():
        wall, inner = timed(code)
        inner_text = f"{inner:.2f} s" if isinstance(inner, float) else inner
        print(f"{name:36s} process {wall:6.2f} s   phase {inner_text}")
    wall, per_check = timed(CHECKS)
    print(f"{'quick checks in one process':36s} process {wall:6.2f} s")
    if isinstance(per_check, dict):
        heavy = per_check.pop("heavy modules imported", [])
        for check, (seconds, status) in per_check.items():
            print(f"    {check:28s} {seconds:6.2f} s  {status}")
        print(f"    heavy modules the quick checks imported: {', '.join(heavy) or 'none'}")
    else:
        print(f"    {per_check}")
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "quick.json"
        argv = [sys.executable, "-m", "envcheck", "run", "--level", "quick", "--json", str(report)]
        began = time.perf_counter()
        subprocess.run(
            argv + ([] if has_gpu() else ["--allow-cpu"]),
            capture_output=True,
            check=False,
            timeout=600,
            cwd=Path(__file__).resolve().parents[1],
        )
        print(f"{'envcheck run --level quick (CLI)':36s} process {time.perf_counter() - began:6.2f} s")
    return 0


def has_gpu() -> bool:
    """Whether this host has an NVIDIA device node (as the runner decides it)."""
    from envcheck.core.runner import gpu_present

    return gpu_present()


if __name__ == "__main__":
    sys.exit(main())
