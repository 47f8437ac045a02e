"""Print the verdict of every deployment context of tests/staging/contexts.py on the staged 8-GPU node, for one
envcheck tree (or two: before and after), with the time each run took. Needs root (a private mount namespace).

    python bench/shared_node_matrix.py                       # this checkout
    python bench/shared_node_matrix.py --before /tmp/old     # a column for another checkout of envcheck
    python bench/shared_node_matrix.py --cold-ms 6000        # one cold 8-GPU prolog at 6 s per GPU, timed
    python bench/shared_node_matrix.py --match fabric        # only the contexts whose name says "fabric"

What is staged and what is real: tests/staging/gpu_node.py. No figure here is a GPU's.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.staging.contexts import BOOT, CASES, HOST, Case  # noqa: E402
from tests.staging.gpu_node import Node, eight_gpus, staged_node  # noqa: E402


def verdict(case: Case, tree: Path, folder: Path) -> tuple[str, float]:
    """'exit N: the first check that did not pass, its status and code' and the seconds the last run took."""
    with staged_node(case.node, folder, tree) as node:
        for _ in range(case.runs):
            began = time.monotonic()
            done, results = node.envcheck(*case.args, timeout=300)
            took = time.monotonic() - began
    worst = [
        f"{n} {r['status']}" + (f" {r['code']}" if r.get("code") else "")
        for n, r in results.items()
        if n != "_report" and r["status"] not in ("pass", "skip")
    ]
    return f"exit {done.returncode}: {', '.join(worst) or 'all pass/skip'}", took


def main() -> int:
    """Print the matrix."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--before", type=Path, help="another checkout whose envcheck gives the 'before' column"
    )
    parser.add_argument(
        "--cold-ms", type=int, help="time one cold 8-GPU prolog with this cold start per GPU (ms)"
    )
    parser.add_argument(
        "--match", default="", help="only the contexts whose name contains one of these texts (a|b|c)"
    )
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="envcheck-matrix-"))
    try:
        if args.cold_ms:
            case = Case(
                f"cold 8-GPU prolog, persistence off, {args.cold_ms} ms per GPU",
                Node(eight_gpus(), persistence=False, cold_ms_per_gpu=args.cold_ms, kmsg=BOOT),
                (*HOST, "--timeout", "300"),
                0,
            )
            text, took = verdict(case, ROOT, folder)
            print(f"{case.name}: {text} in {took:.1f} s")
            return 0
        trees = [("before", args.before)] if args.before else []
        trees.append(("after", ROOT))
        print("| context | expected | " + " | ".join(name for name, _ in trees) + " |")
        print("|---|---|" + "---|" * len(trees))
        wanted = [w.lower() for w in args.match.split("|")]
        for case in [c for c in CASES if any(w in c.name.lower() for w in wanted)]:
            cells = []
            for _, tree in trees:
                text, took = verdict(case, tree, folder)
                cells.append(f"{text} ({took:.1f} s)")
            print(f"| {case.name} | exit {case.exit_code} | " + " | ".join(cells) + " |", flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
