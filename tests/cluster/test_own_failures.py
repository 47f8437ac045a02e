"""Own failures never drain (issue 23): a metrics write that fails is envcheck's problem, in every cluster mode.

Real: the writer, the file system (a path whose parent is a regular file fails with ENOTDIR, as a full or
read-only disk fails with ENOSPC/EROFS: all OSError)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from envcheck.cluster.mode import finish
from envcheck.core.result import Result, Status

pytest.importorskip("prometheus_client")


@pytest.mark.parametrize("mode, expected", [("prolog", 0), ("preflight", 0), ("npd", 2)])
def test_a_failed_metrics_write_never_drains(tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: str,
                                             expected: int) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    args = argparse.Namespace(for_mode=mode, prometheus=str(blocker / "envcheck.prom"), json=None, junit=None)
    ok = [Result(Status.PASS, "fine", name="gpu.health")]
    assert finish(args, ok, {}, 0) == expected
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"envcheck: warning: metrics not written to {blocker}/envcheck.prom")
    assert err.rstrip().endswith("(envcheck's own failure, not the node's)")
