"""envcheck.probe.cgroup and container.runtime on real cgroups: a child process moved into cgroups made for the test
(a CPU quota on a parent with an unlimited child below it, pids.max, a memory limit), as a Slurm job or a systemd
slice puts a process on a host, and read from inside. Nothing is staged. Needs root and writable cgroup v1
controllers or a cgroup v2 hierarchy with them delegated; elsewhere the tests skip with the reason (the staged layouts
of tests/probe/test_cgroup_layouts.py still run).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from envcheck.probe.cgroup import members, mounts
from tests.helpers import ROOT

GIB = 1 << 30


@dataclass
class Groups:
    """The cgroups a test made: the folders to join (one per hierarchy) and the one its CPU quota sits on."""

    join: list[Path]
    quota_parent: Path
    v2: bool


def _own() -> dict[str, str]:
    lines = Path("/proc/self/cgroup").read_text().splitlines()
    return {
        c: p for _, cs, p in (line.split(":", 2) for line in lines) for c in (cs.split(",") if cs else [""])
    }


@contextmanager
def limited(cpu: bool = True, pids: bool = True, memory: bool = True) -> Iterator[Groups]:
    """Child cgroups of this process's own: '<name>' with the limits asked for and '<name>/inner' below it (no limit
    of its own) in each hierarchy; removed on the way out (the children that joined them have exited by then)."""
    if os.geteuid() != 0:
        pytest.skip("making cgroups needs root")
    own, name = _own(), f"envcheck-test-{uuid.uuid4().hex[:8]}"
    v1 = Path("/sys/fs/cgroup/cpu/tasks").is_file()
    writes: list[tuple[Path, str]] = []
    if v1:
        parents = {
            c: Path("/sys/fs/cgroup", c, own.get(c, "/").lstrip("/"), name) for c in ("cpu", "pids", "memory")
        }
        writes += [(parents["cpu"] / "cpu.cfs_quota_us", "50000")] if cpu else []
        writes += [(parents["pids"] / "pids.max", "64")] if pids else []
        writes += [(parents["memory"] / "memory.limit_in_bytes", str(3 * GIB))] if memory else []
    else:
        parents = {"": Path("/sys/fs/cgroup", own[""].lstrip("/"), name)}
        writes += [(parents[""] / "cpu.max", "50000 100000")] if cpu else []
        writes += [(parents[""] / "pids.max", "64")] if pids else []
        writes += [(parents[""] / "memory.max", str(3 * GIB))] if memory else []
    made: list[Path] = []
    try:
        for parent in parents.values():
            for folder in (parent, parent / "inner"):
                folder.mkdir()
                made.append(folder)
            if not v1:  # v2: the parent hands its controllers to the inner cgroup
                (parent / "cgroup.subtree_control").write_text("+cpu +pids +memory")
        for path, value in writes:
            path.write_text(value)
    except OSError as exc:  # seen on the H100 proof host: a controller not delegated to this subtree
        for folder in reversed(made):
            folder.rmdir()
        pytest.skip(f"cannot make limited cgroups here ({exc.filename}: {exc.strerror})")
    try:
        yield Groups([p / "inner" for p in parents.values()], parents.get("cpu") or parents[""], not v1)
    finally:
        for folder in reversed(made):
            folder.rmdir()


def run_inside(groups: Groups, code: str, *wrap: str) -> dict[str, object]:
    """`code`'s JSON from a child that joined every cgroup of `groups` first (`wrap`: a command it then runs under,
    such as `unshare --cgroup`)."""
    join = "; ".join(f"echo $$ > {folder}/cgroup.procs" for folder in groups.join)
    done = subprocess.run(
        ["sh", "-c", f'{join} && exec "$@"', "sh", *wrap, sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": ""},
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


READ = """
import dataclasses, json
from envcheck.probe.cgroup import own_limits
print(json.dumps(dataclasses.asdict(own_limits())))
"""


def test_the_reader_sees_its_own_cgroups_limits_not_the_roots() -> None:
    """A quota on the parent, nothing on the cgroup the process is in: the effective quota is the parent's."""
    with limited() as groups:
        got = run_inside(groups, READ)
    assert (got["cpu_quota"], got["pids_max"], got["memory_bytes"]) == (0.5, 64, 3 * GIB), got
    cgroups = got["cgroups"]
    assert isinstance(cgroups, dict) and cgroups["cpu"] == str(groups.quota_parent / "inner")


def test_inside_a_cgroup_namespace_made_after_the_mount() -> None:
    """`unshare --cgroup`: /proc/self/cgroup says "/", the mounts' roots lie above it; the pid finds the cgroup."""
    with limited(pids=False, memory=False) as groups:
        got = run_inside(groups, READ, "unshare", "--cgroup")
    assert got["cpu_quota"] == 0.5 and got["cgroups"]["cpu"] == str(groups.quota_parent / "inner"), got  # type: ignore[index]


RUNTIME = """
import json
from envcheck.checks.runtime.profile import runtime_profile
from envcheck.core.check import Context
r = runtime_profile(Context())
print(json.dumps({"status": r.status.value, "codes": r.measured.get("codes", []), "fix": r.remediation,
                  "cgroup": r.measured.get("cgroup")}))
"""


def test_container_runtime_names_the_quota_and_pids_of_a_job_on_a_host() -> None:
    """The old probes read /sys/fs/cgroup/cpu.max and pids.max, the hierarchy's root: a process in a CPU-limited
    cgroup on a host (a Slurm job, a systemd slice) passed."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("the quota finding needs at least 2 CPUs for torch's threads to exceed a 0.5-CPU quota")
    with limited(memory=False) as groups:
        got = run_inside(groups, RUNTIME)
    assert got["status"] == "warn", got
    assert {"runtime.cpu_quota_below_threads", "runtime.nproc_low"} <= set(got["codes"]), got  # type: ignore[arg-type]
    assert got["cgroup"] == str(groups.quota_parent / "inner") and "export OMP_NUM_THREADS=1" in str(
        got["fix"]
    )


def test_the_healthy_twin_in_a_cgroup_without_limits() -> None:
    with limited(cpu=False, pids=False, memory=False) as groups:
        got = run_inside(groups, RUNTIME)
    codes = set(got["codes"])  # type: ignore[arg-type]
    assert not codes & {"runtime.cpu_quota_below_threads", "runtime.nproc_low"}, got


def test_the_v2_hierarchy_path_is_found_for_real() -> None:
    """On a hybrid host v2 holds no limit controller; its directory is still located from "0::/<path>"."""
    own = _own()
    unified = next((m for m in mounts(Path("/proc/self/mountinfo").read_text()) if m.version == 2), None)
    if unified is None or os.geteuid() != 0 or "" not in own:
        pytest.skip("needs root and a cgroup v2 mount")
    folder = Path(unified.mountpoint, own[""].lstrip("/"), f"envcheck-test-{uuid.uuid4().hex[:8]}")
    try:
        folder.mkdir()
    except OSError as exc:
        pytest.skip(f"cannot make a v2 cgroup here ({exc.strerror})")
    code = (
        "import json; from pathlib import Path; from envcheck.probe.cgroup import locate, members, mounts; "
        "m = next(x for x in mounts(Path('/proc/self/mountinfo').read_text()) if x.version == 2); "
        "c = next(x for x in members(Path('/proc/self/cgroup').read_text()) if x.hierarchy == 0); "
        "print(json.dumps({'dir': str(locate(c, m))}))"
    )
    try:
        got = run_inside(Groups([folder], folder, True), code)
    finally:
        folder.rmdir()
    assert got["dir"] == str(folder) and members("0::/x\n")[0].path == "/x"
