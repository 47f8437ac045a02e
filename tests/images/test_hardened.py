"""The runtime image under hardened `docker run` flags, on the real engine.

Each case runs one container (tests/helpers/containers.py's helper: a timeout, always removed). Inside it, first the
premise: the real job (torch.compile, a DataLoader with workers, Triton's cache, getpass as torch asks) breaks there,
or must work for a case that asserts a clean pass. Then `envcheck run --allow-cpu --json -` on a relevant subset:
a whole report, no traceback, no ERROR, and exactly the named cause. Nothing is simulated: the engine and kernel
enforce every flag. CPU only here: Triton's GPU compile is not run, its cache write is (Triton's own cache manager).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.helpers.containers import run_streams

pytestmark = [pytest.mark.docker, pytest.mark.slow]

COMPILE = (
    "import torch\ntorch._inductor.config.compile_threads = 1\n"
    "print('compiled', torch.compile(lambda x: x.sin() * 2)(torch.ones(3)))"
)
# Triton's own cache manager writes where a GPU compile puts its kernels and launcher .so (TRITON_CACHE_DIR)
TRITON_CACHE = (
    "import getpass\nprint('user', getpass.getuser())\n"
    "from triton.runtime.cache import get_cache_manager\n"
    "print('cached', get_cache_manager('ab' * 32).put(b'x', 'kernel.bin'))"
)
INDUCTOR_USER = (
    "from torch._inductor.runtime.cache_dir_utils import default_cache_dir\n"
    "print('inductor cache', default_cache_dir())"
)  # asks getpass.getuser() for the dir's name
LOADER = """
import torch
from torch.utils.data import DataLoader, Dataset
class Items(Dataset):
    def __len__(self): return 8
    def __getitem__(self, i): return [torch.full((SIZE,), float(i)) for _ in range(PARTS)]
n = sum(len(b) for b in DataLoader(Items(), batch_size=2, num_workers=2))
print('batches ok', n)
"""
MANY_FDS = LOADER.replace("SIZE", "4").replace("PARTS", "200")  # 400 tensors, one shared fd each, per batch
BIG_SHM = LOADER.replace("SIZE", str(1 << 20)).replace("PARTS", "1")  # 8 MiB per batch through /dev/shm
SMALL = LOADER.replace("SIZE", "4").replace("PARTS", "1")
# without a temp dir the workers fail and the loader waits for its timeout (forever without one)
STALLS = (
    "import subprocess, sys\nloader = "
    + repr(
        LOADER.replace("SIZE", "4")
        .replace("PARTS", "1")
        .replace("num_workers=2", "num_workers=2, timeout=10")
    )
    + "\nsubprocess.run([sys.executable, '-c', loader])\n"
)
# one DataLoader worker per core of a 64-core node (this machine has 2 cores: the count is set, not derived)
WORKERS_64 = (
    "import torch\nfrom torch.utils.data import DataLoader\n"
    "print('items', sum(1 for _ in DataLoader(list(range(64)), num_workers=64)))"
)
EXEC_MOUNTS = {"/tmp": "exec", "/home/dev/.cache": "exec"}  # docs/images.md's read-only line (Hardened runs)


@dataclass(frozen=True)
class Case:
    """One hardened run: docker flags, the real job and whether it breaks, what envcheck must name."""

    flags: dict[str, Any]
    premise: str
    breaks: str | tuple[str, ...] | None  # text(s) of the real job's failure; None: the job works there
    only: str  # checks to run ("" = the whole quick level)
    codes: tuple[str, ...]  # container.runtime's findings, in order; () = a clean pass
    named: dict[str, str] = field(default_factory=dict)  # other checks that must fail with this code
    level: str = "quick"


CASES = {
    "read-only": Case(
        {"read_only": True},
        STALLS + COMPILE,
        ("DataLoader timed out after 10 seconds", "No usable temporary directory"),
        "container.runtime,compile.inductor,container.limits,dist.all_reduce",
        ("runtime.tmp_readonly", "runtime.home_readonly"),
        # a DataLoader's workers fail and it hangs; mp.spawn-style launchers write error files with
        # tempfile: each names the read-only temp dir
        {
            "compile.inductor": "runtime.tmp_readonly",
            "container.limits": "runtime.tmp_readonly",
            "dist.all_reduce": "runtime.tmp_readonly",
        },
        level="full",
    ),
    "read-only --tmpfs /tmp": Case(
        {"read_only": True, "tmpfs": {"/tmp": "", "/home/dev/.cache": ""}},
        COMPILE,
        "failed to map segment from shared object",
        "container.runtime,container.limits",
        ("runtime.tmp_noexec",),
    ),
    "read-only --tmpfs /tmp:exec": Case({"read_only": True, "tmpfs": EXEC_MOUNTS}, COMPILE, None, "", ()),
    "--user 4242:4242": Case(
        {"user": "4242:4242"}, TRITON_CACHE, None, "container.runtime,container.limits,vision.ops", ()
    ),
    "--user 4242:4242 -e USER= -e LOGNAME=": Case(
        {"user": "4242:4242", "environment": {"USER": "", "LOGNAME": ""}},
        INDUCTOR_USER,
        "getpwuid(): uid not found",
        "container.runtime",
        ("runtime.no_passwd_entry",),
    ),
    "--user 4242:0": Case({"user": "4242:0"}, TRITON_CACHE, None, "", ()),
    "--cap-drop ALL --security-opt no-new-privileges": Case(
        {"cap_drop": ["ALL"], "security_opt": ["no-new-privileges"]}, SMALL, None, "", ()
    ),
    "--pids-limit 64": Case(
        {"pids_limit": 64},
        WORKERS_64,
        "Resource temporarily unavailable",
        "container.runtime,container.limits,dist.all_reduce",
        ("runtime.nproc_low",),
    ),
    "--ulimit nofile=64": Case(
        {"ulimits": [{"Name": "nofile", "Soft": 64, "Hard": 64}]},
        MANY_FDS,
        "Too many open files",
        "container.runtime,container.limits,dist.all_reduce",
        ("runtime.nofile_low",),
    ),
    "--tmpfs /tmp:noexec": Case(
        {"tmpfs": {"/tmp": "noexec"}},
        COMPILE,
        "failed to map segment from shared object",
        "container.runtime",
        ("runtime.tmp_noexec",),
    ),
    "--shm-size 1m": Case(
        {"shm_size": "1m"},
        BIG_SHM,
        "unable to allocate shared memory",
        "container.shm,container.limits",
        (),
        {"container.limits": "shm.small"},
    ),
}
SCRIPT = (
    'python -c "$1" >&2; echo "premise exit $?" >&2; echo "=== envcheck" >&2; '
    'shift; exec envcheck run --allow-cpu --json - "$@"'
)


def run_case(client: Any, image: str, case: Case) -> tuple[int, str, dict[str, dict[str, Any]]]:
    """Premise, then envcheck, in one container: (premise exit, premise output, results by check name)."""
    from docker.types import Ulimit

    flags = {**case.flags, "ulimits": [Ulimit(**u) for u in case.flags.get("ulimits", [])]}
    args = ["--level", case.level] + (["--only", case.only] if case.only else [])
    code, stdout, stderr = run_streams(
        client, image, ["sh", "-c", SCRIPT, "sh", case.premise, *args], timeout_s=240, **flags
    )
    premise, _, envcheck = stderr.partition("=== envcheck")  # envcheck's stderr: the table, any traceback
    assert "Traceback" not in envcheck, envcheck[-4000:]
    assert code in (0, 1), (code, envcheck[-3000:])
    report = json.loads(stdout)
    premise_exit = int(re.findall(r"premise exit (\d+)", premise)[-1])
    return premise_exit, premise, {r["name"]: r for r in report["results"]}


@pytest.mark.parametrize("name", list(CASES))
def test_hardened_run(docker_client: Any, runtime_image: str, name: str) -> None:
    case = CASES[name]
    premise_exit, premise, results = run_case(docker_client, runtime_image, case)
    if case.breaks is None:
        assert premise_exit == 0, premise[-3000:]
    else:
        texts = (case.breaks,) if isinstance(case.breaks, str) else case.breaks
        assert premise_exit != 0 and all(t in premise for t in texts), premise[-3000:]
    assert not [n for n, r in results.items() if r["status"] == "error"], results
    if case.only:
        assert set(results) == set(case.only.split(","))
    runtime = results.get("container.runtime")
    if runtime is not None:
        assert tuple(runtime["measured"].get("codes", ())) == case.codes, runtime
        assert runtime["status"] == ("warn" if case.codes else "pass"), runtime
        assert runtime["fault_class"] == ("config" if case.codes else None)
    for check, code in case.named.items():
        assert (results[check]["status"], results[check]["code"], results[check]["fault_class"]) == (
            "fail",
            code,
            "config",
        ), results[check]
    # everything else works there: no failure beyond the named ones (CUDA-only checks warn or skip on CPU)
    failing = {n for n, r in results.items() if r["status"] == "fail"}
    assert failing <= set(case.named), {n: results[n]["summary"] for n in failing}
    assert all(r["fault_class"] != "node" for r in results.values())
