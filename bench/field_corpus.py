"""Print gpu.health's verdict on every case of the kernel-log field corpus (tests/checks/gpu_health/field_records),
each written as /dev/kmsg records, dmesg text and journal lines, for one envcheck tree or two (before and after), and
how many verdicts match the cases' ground truth. In process, no staging needed (the node path's own verdict,
`--for health`).

    python bench/field_corpus.py                      # this checkout
    python bench/field_corpus.py --before /tmp/old    # and another checkout of envcheck, side by side

The corpus and its sources: tests/checks/gpu_health/field_records/SOURCES.md. No figure here is a GPU's.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Run in a child per tree, so each tree's envcheck is imported alone; the corpus loader is always this checkout's.
CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from tests.checks.gpu_health.field_corpus import FORMS, load, node_state
sys.path.insert(0, sys.argv[2])
try:
    from envcheck.checks.gpu_health.kernel_events import scan
except ImportError:  # a tree from before kernel_events
    from envcheck.checks.gpu_health.xid import scan
from envcheck.checks.gpu_health.verdict import verdict
from envcheck.core.check import CheckOptions, Context

ctx = Context(options=CheckOptions(node_path=True, cluster_mode="health"))
out = {}
for case in load():
    for form, write in FORMS.items():
        found = scan(write(case.records))
        log = {"source": "/dev/kmsg", "error": None, "xid": found["xid"], "bus": found["bus"],
               "driver": found.get("driver", []), "window": {"after_seq": None, "since_s": None}}
        r = verdict(node_state(case) | {"kernel_log": log}, ctx)
        node = r.status.value == "fail" and r.fault_class is not None and r.fault_class.value == "node"
        out[f"{case.name}|{form}"] = [node, f"{r.status.value} {r.code or ''}".strip()]
print(json.dumps(out))
"""


def verdicts(tree: Path) -> dict[str, list[object]]:
    """Every (case, form)'s [node fault?, 'status code'] by the envcheck of `tree`."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(ROOT), str(tree)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    result: dict[str, list[object]] = json.loads(done.stdout)
    return result


def main() -> int:
    """Print the table and the totals."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--before", type=Path, help="another checkout whose envcheck gives the 'before' column"
    )
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from tests.checks.gpu_health.field_corpus import load

    truth = {c.name: bool(c.truth["node_fault"]) for c in load()}
    trees = ([("before", args.before)] if args.before else []) + [("now", ROOT)]
    columns = {name: verdicts(tree) for name, tree in trees}
    sources = {c.source.split("#")[0] for c in load()}
    print(f"{len(truth)} cases from {len(sources)} sources, each in 3 record forms (kmsg, dmesg, journal)")
    print(f"{'case':46} {'truth':6} " + " ".join(f"{n + ' (kmsg)':28}" for n, _ in trees))
    for name, node in truth.items():
        cells = [columns[n][f"{name}|kmsg"] for n, _ in trees]
        marks = [f"{'ok ' if c[0] == node else 'BAD'} {c[1]}"[:28] for c in cells]
        print(f"{name[:46]:46} {'node' if node else '-':6} " + " ".join(f"{m:28}" for m in marks))
    for n, _ in trees:
        right = sum(1 for key, v in columns[n].items() if v[0] == truth[key.split("|")[0]])
        print(f"{n}: {right} of {len(columns[n])} verdicts match the ground truth")
    return 0


if __name__ == "__main__":
    sys.exit(main())
