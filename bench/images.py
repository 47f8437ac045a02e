"""Image figures (printed, never asserted): size by layer vs the Python-package floor, cold build,
warm rebuild after an envcheck-only change, and pip vs uv for the torch layer.

    PYTHONPATH=. python bench/images.py size   [--image REF]
    PYTHONPATH=. python bench/images.py warm   [--row ID] [--target runtime]
    PYTHONPATH=. python bench/images.py cold   [--row ID]      (builds the torch stage with --no-cache)
    PYTHONPATH=. python bench/images.py installer [--row ID]  (torch stage: pip vs uv, offline wheels)
Uses the docker CLI envcheck.images.engine.docker_binary() chooses and the base local/debian:bookworm unless --base is given.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import time
from pathlib import Path

from envcheck.images import build as builder
from envcheck.images.engine import docker_binary
from envcheck.images.matrix import default_matrix_path, load_matrix

DOCKER = docker_binary()
ENV = {**os.environ, "DOCKER_BUILDKIT": "1"}
TOUCHED = builder.REPO_ROOT / "envcheck" / "images" / "__init__.py"


def sh(cmd: list[str], timeout: float = 3600) -> str:
    return subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=timeout, check=True).stdout


def size(image: str) -> None:
    """Layers over 1 MB, total, and the floor: what site-packages holds (the packages it must contain)."""
    rows = json.loads(
        "["
        + ",".join(sh([DOCKER, "history", "--no-trunc", "--format", "{{json .}}", image]).splitlines())
        + "]"
    )
    total = int(sh([DOCKER, "image", "inspect", "-f", "{{.Size}}", image]))
    print(f"{image}: {total / 1e9:.2f} GB uncompressed")
    for row in rows:
        size_text = row["Size"]
        if size_text.endswith(("GB", "MB")) and float(size_text[:-2]) >= (
            1 if size_text.endswith("MB") else 0
        ):
            print(f"  {size_text:>9}  {row['CreatedBy'][:110]}")
    out = sh(
        [
            DOCKER,
            "run",
            "--rm",
            "--entrypoint",
            "bash",
            image,
            "-c",
            "du -sb /opt/venv/lib/python3*/site-packages | cut -f1; du -sbc /usr /var /etc | tail -1 | cut -f1",
        ]
    )
    floor, system = (int(x) for x in out.split())
    print(f"  python packages (site-packages): {floor / 1e9:.2f} GB  <- floor")
    print(f"  OS + compiler + python (/usr /var /etc): {system / 1e9:.2f} GB")
    print(
        f"  image / floor = {total / floor:.3f} ({(total / floor - 1) * 100:.1f}% above the floor; target <= 15%)"
    )


def timed_build(row_id: str, target: str, *extra: str, installer: str = "pip") -> float:
    """Wall time of the whole `docker build`."""
    return timed_build_log(row_id, target, *extra, installer=installer)[0]


def step_seconds(log: str, needle: str) -> float:
    """The BuildKit plain-progress DONE time of the step whose title contains `needle`."""
    step = re.search(r"^(#\d+) \[[^\]]+\] RUN .*" + re.escape(needle), log, re.M)
    if step is None:
        return float("nan")
    done = re.search("^" + step.group(1) + r" DONE ([\d.]+)s", log, re.M)
    return float(done.group(1)) if done else float("nan")


def timed_build_log(row_id: str, target: str, *extra: str, installer: str = "pip") -> tuple[float, str]:
    row = load_matrix(default_matrix_path()).row(row_id)
    stage = target
    target = target if target in row.targets else "runtime"  # internal stages (torch) reuse runtime's args
    req = builder.BuildRequest(
        row=row,
        target=target,
        repo="envcheck-bench",
        base_image=BASE,
        offline=True,
        installer=installer,
        wheelhouse_image=builder.wheelhouse_image(row),
        ca_bundle=Path("/etc/ssl/certs/ca-certificates.crt"),
    )
    cmd = builder.build_command(req)
    cmd[cmd.index("--target") + 1] = stage
    if stage != target:
        cmd = [c for i, c in enumerate(cmd) if not (c == "-t" or (i and cmd[i - 1] == "-t"))]
    cmd = [*cmd[:2], "--progress=plain", *extra, *cmd[2:]]
    start = time.monotonic()
    done = subprocess.run(cmd, env=ENV, timeout=3600, check=True, capture_output=True, text=True)
    return time.monotonic() - start, done.stderr


def warm(row_id: str, target: str) -> None:
    timed_build(row_id, target)  # make sure everything is cached
    original = TOUCHED.read_text()
    try:
        TOUCHED.write_text(original + f"# bench {time.time()}\n")
        took = timed_build(row_id, target)
    finally:
        TOUCHED.write_text(original)
    print(f"warm rebuild of {target} after an envcheck-only change: {took:.1f} s (target <= 20 s)")
    timed_build(row_id, target)


def cold(row_id: str) -> None:
    took = timed_build(row_id, "runtime", "--no-cache")
    print(f"cold build of runtime (apt + torch stack from the local wheelhouse, --no-cache): {took:.1f} s")


def installer(row_id: str) -> None:
    for name in ("pip", "uv"):
        took, log = timed_build_log(row_id, "torch", "--no-cache", installer=name)
        step = step_seconds(log, "install-torch.sh")
        apt = step_seconds(log, "install-system.sh")
        print(f"  (apt base step {apt:.1f} s in the same build)")
        print(
            f"torch layer with {name}: install step {step:.1f} s; whole --no-cache build of the torch stage "
            f"{took:.1f} s (offline wheels, 2 cores)"
        )


BASE = "local/debian:bookworm"


def main() -> None:
    global BASE
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("what", choices=["size", "warm", "cold", "installer"])
    parser.add_argument("--image", default="envcheck:2.11.0-cuda13.0-runtime")
    parser.add_argument("--row", default="2.11-cu130")
    parser.add_argument("--target", default="runtime")
    parser.add_argument("--base", default=BASE)
    args = parser.parse_args()
    BASE = args.base
    {
        "size": lambda: size(args.image),
        "warm": lambda: warm(args.row, args.target),
        "cold": lambda: cold(args.row),
        "installer": lambda: installer(args.row),
    }[args.what]()


if __name__ == "__main__":
    main()
