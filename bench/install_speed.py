"""`make verify`'s install step, uv against pip: the torch stack into a fresh venv, cold and warm cache.

    python bench/install_speed.py [--repeat 3] [--tools uv,pip] [--packages "torch==2.14.1 torchvision==0.29.2"]

For each tool and round: a cold install (a fresh, empty cache dir: every wheel is downloaded) into a fresh
venv, then a warm one (the same cache, another fresh venv). pip compiles every module to bytecode as it
installs and uv does not (the first import then does it), so `uv-pyc` (uv --compile-bytecode) is the
like-for-like figure. Both tools read PyPI only: pip's own config
(pip.conf, PIP_FIND_LINKS, local mirrors) is switched off with PIP_CONFIG_FILE=/dev/null, so the figures
compare the tools, not the indexes. The caches live under --work (default: a temp dir on the same
filesystem as the venvs, which is where uv hard-links from; pass another filesystem to see copies).
Prints each install's seconds, the medians and the load average at the start and end; asserts nothing.
The default packages are `envcheck matrix pins` (docker/matrix.toml's `latest` row, what `make verify` installs).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 1800


def default_packages() -> list[str]:
    """The `latest` row's pins, as `make verify` installs them."""
    out = subprocess.run(
        [sys.executable, "-m", "envcheck", "matrix", "pins"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return out.stdout.split()


def clean_env(cache: Path) -> dict[str, str]:
    """Our environment without pip's local config or mirrors, with both tools' caches pointed at `cache`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    env.update(
        PIP_CONFIG_FILE=os.devnull,
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_CACHE_DIR=str(cache / "pip"),
        UV_CACHE_DIR=str(cache / "uv"),
        UV_NO_CONFIG="1",
    )
    return env


def install(tool: str, uv: str, venv: Path, packages: list[str], env: dict[str, str]) -> float:
    """Seconds to create `venv` and install `packages` into it with `tool` (raises on failure)."""
    if tool.startswith("uv"):
        compile_ = ["--compile-bytecode"] if tool == "uv-pyc" else []
        steps = [
            [uv, "venv", "-q", "--python", sys.executable, str(venv)],
            [uv, "pip", "install", "-q", *compile_, "--python", str(venv / "bin" / "python"), *packages],
        ]
    else:
        steps = [
            [sys.executable, "-m", "venv", str(venv)],
            [str(venv / "bin" / "pip"), "install", "-q", *packages],
        ]
    began = time.perf_counter()
    for argv in steps:
        subprocess.run(argv, env=env, check=True, timeout=TIMEOUT_S, stdout=subprocess.DEVNULL)
    return time.perf_counter() - began


def load() -> str:
    """The 1-minute load average and the core count."""
    return f"load {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--tools", default="uv,uv-pyc,pip", help="uv-pyc: uv with --compile-bytecode, as pip does"
    )
    parser.add_argument("--packages", default="")
    parser.add_argument("--work", default="", help="where the venvs and caches go (default: a temp dir)")
    args = parser.parse_args()
    packages = args.packages.split() or default_packages()
    uv = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
    print(f"packages: {' '.join(packages)}\nuv: {uv}\nstart: {load()}", flush=True)
    figures: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory(dir=args.work or None, prefix="install-speed-") as tmp:
        for round_ in range(args.repeat):
            for tool in args.tools.split(","):
                cache = Path(tmp) / f"cache-{tool}-{round_}"
                env = clean_env(cache)
                for state in ("cold", "warm"):
                    venv = Path(tmp) / f"venv-{tool}-{state}"
                    seconds = install(tool, uv, venv, packages, env)
                    figures.setdefault((tool, state), []).append(seconds)
                    print(
                        f"round {round_ + 1}  {tool:6s} {state} cache  {seconds:7.1f} s   ({load()})",
                        flush=True,
                    )
                    shutil.rmtree(venv)
                shutil.rmtree(cache, ignore_errors=True)
    print(f"end: {load()}")
    for (tool, state), runs in sorted(figures.items()):
        print(
            f"{tool:6s} {state} cache   median {statistics.median(runs):7.1f} s   "
            f"runs {' '.join(f'{r:.1f}' for r in runs)}"
        )
    for state in ("cold", "warm"):
        for uv_tool in ("uv", "uv-pyc"):
            if ("pip", state) in figures and (uv_tool, state) in figures:
                ratio = statistics.median(figures[("pip", state)]) / statistics.median(
                    figures[(uv_tool, state)]
                )
                print(f"{state} cache: {uv_tool} is {ratio:.1f}x faster than pip")
    return 0


if __name__ == "__main__":
    sys.exit(main())
