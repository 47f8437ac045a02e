"""A worker whose import failed is never reused, in the two hardened runtimes where that import fails: a read-only
temp dir (the real torch: `import torch._dynamo` meets it part-way) and a uid with no passwd entry.

Real: the kernel's restrictions (unshare -m read-only binds, setpriv to a uid with no passwd entry), torch, the
engine and its fork server. Staged (no-passwd case only): the library that asks getpass for the user name at import
(tests/core/half_import/asks_the_user.py; torch 2.13 no longer does at import). Needs root (unshare, setpriv).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import pytest

from tests.hardened.staging import UID, Hardening, can_stage, python, run

pytestmark = pytest.mark.skipif(not can_stage(), reason="needs root with util-linux unshare/setpriv/prlimit")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
READ_ONLY = Hardening(
    readonly=("/", "/tmp", "/var/tmp", os.path.expanduser("~"), "/work"), env={"PYTHONPATH": REPO}
)
NO_PASSWD = Hardening(uid=UID, env={"HOME": "/", "PYTHONPATH": REPO, "USER": "", "LOGNAME": ""})
ALREADY = "already registered in mega-cache artifact factory"
# Numerics checks of one isolation group that import torch._dynamo (the first meets the read-only temp dir).
DYNAMO_CHECKS = (
    "amp.clip_after_unscale,amp.training_convergence,train.checkpointing,train.resume,optim.differential"
)


def test_read_only_temp_the_checks_after_a_failed_torch_import_name_the_cause(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A cache dir in this process's environment (one the user who runs the tests set) would spare the import its temp
    # dir: the staged run gets none of them, as a fresh container has none.
    for name in ("TMPDIR", "TEMP", "TMP", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)
    premise = python(
        READ_ONLY,
        "for _ in range(2):\n    try:\n        import torch._dynamo\n"
        "    except BaseException as exc:\n        print(type(exc).__name__, exc)\n",
    )
    assert len(premise.stdout.splitlines()) >= 2, (premise.stdout, premise.stderr[-2000:])
    first, second = premise.stdout.splitlines()[:2]
    assert "No usable temporary directory" in first and ALREADY in second, premise.stdout
    proc = run(
        READ_ONLY,
        [
            sys.executable,
            "-m",
            "envcheck",
            "run",
            "--allow-cpu",
            "--level",
            "full",
            "--json",
            "-",
            "--only",
            DYNAMO_CHECKS,
        ],
        timeout_s=600,
    )
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    results = {r["name"]: r for r in json.loads(proc.stdout)["results"]}
    assert [n for n, r in results.items() if r["status"] == "error"] == []
    assert not [n for n, r in results.items() if ALREADY in (r["details"] or "")]
    failing = {n: r["code"] for n, r in results.items() if r["status"] == "fail"}
    assert failing and set(failing.values()) == {"runtime.tmp_readonly"}, failing


def _staged(h: Hardening, *names: str) -> list[dict[str, Any]]:
    proc = run(h, [sys.executable, "-m", "tests.hardened.poison_driver", *names], timeout_s=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results: list[dict[str, Any]] = json.loads(proc.stdout)
    return results


def test_no_passwd_the_check_after_a_failed_import_names_the_cause() -> None:
    premise = python(NO_PASSWD, "import getpass\ngetpass.getuser()")
    assert premise.returncode != 0 and "getpwuid(): uid not found" in premise.stderr
    first, second, after = _staged(NO_PASSWD, "imports_user_module", "imports_user_module", "reports_pid")
    for result in (first, second):
        assert (result["status"], result["code"]) == ("fail", "runtime.no_passwd_entry"), result
        assert ALREADY not in result["details"]
    assert after["status"] == "pass"


def test_no_passwd_healthy_twin_with_user_set_imports_once_and_keeps_its_worker() -> None:
    """The same uid with USER set (getpass reads it first): the import succeeds and nothing is retired."""
    named = Hardening(uid=UID, env={**NO_PASSWD.env, "USER": "runner", "LOGNAME": "runner"})
    first, second, after = _staged(named, "imports_user_module", "reports_pid", "reports_pid")
    assert first["status"] == "pass" and second["status"] == "pass"
    assert second["measured"]["pid"] == after["measured"]["pid"]
