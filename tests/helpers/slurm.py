"""The one-node Slurm the `slurm` tests run on (munged, slurmctld, slurmd on localhost), and why it cannot start
here; the multi-node one is tests/cluster/multinode.py."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.cluster.slurm_conf import common_lines
from tests.helpers.ports import free_port

ROOT = Path(__file__).resolve().parents[2]


BINARIES = ("munged", "slurmctld", "slurmd", "srun", "sinfo", "scontrol")


START_TIMEOUT_S = 60.0


SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])  # the daemons live in sbin


def slurm_missing() -> str | None:
    missing = [b for b in BINARIES if shutil.which(b, path=SEARCH_PATH) is None]
    if missing:
        return f"{', '.join(missing)} not found: apt-get install slurm-wlm munge (or run .ci/run)"
    if os.geteuid() != 0:
        return "the one-node Slurm runs slurmd as root; run the tests as root"
    return None


def require_slurm() -> None:
    why = slurm_missing()
    if why:
        if os.environ.get("ENVCHECK_REQUIRE_SLURM") == "1":
            pytest.fail(f"slurm test cannot run and ENVCHECK_REQUIRE_SLURM=1: {why}")
        pytest.skip(why)


@dataclass
class Cluster:
    """What the tests need: the node's name, the environment for srun/sinfo, and the prolog switch."""

    dir: Path
    node: str
    env: dict[str, str]
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    started_in_s: float = 0.0

    def set_prolog(self, body: str, kind: str = "prolog") -> None:
        """Replace the Prolog (or, kind="epilog", the Epilog) script, atomically: slurmd may be reading it."""
        tmp = self.dir / f"{kind}.sh.tmp"
        tmp.write_text(
            f"#!/bin/sh\nexec >>{self.dir}/{kind}.log 2>&1\n"  # verdicts stay in the test's folder
            f"export ENVCHECK_SLURM_STATE={self.dir}/slurm-prolog.json\n{body}\n"
        )
        tmp.chmod(0o755)
        tmp.replace(self.dir / f"{kind}.sh")

    def run(
        self, *cmd: str, timeout: float = 60, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(cmd),
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def state(self) -> str:
        return self.run("sinfo", "-h", "-n", self.node, "-o", "%T").stdout.strip()

    def reason(self) -> str:
        return self.run("sinfo", "-R", "-h", "-o", "%E").stdout.strip()

    def wait_state(self, want: str, timeout: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while (got := self.state()) != want:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"node {self.node} is {got!r}, not {want!r}, after {timeout:g}s; logs in {self.dir}/log"
                )
            time.sleep(0.2)

    def resume(self) -> None:
        """Undo a drain so the next test starts from an idle node."""
        if self.state() != "idle":
            self.run("scontrol", "update", f"NodeName={self.node}", "State=RESUME")
            self.wait_state("idle")


def slurm_config(d: Path, node: str) -> str:
    return f"""ClusterName=envcheck
SlurmctldHost={node}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
{common_lines(d)}Epilog={d}/epilog.sh
NodeName={node} NodeAddr=127.0.0.1 CPUs=2 RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes={node} Default=YES MaxTime=INFINITE State=UP
"""


def stop_all(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in reversed(procs):  # slurmd, slurmctld, then munged
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)


MULTI_BINARIES = ("ip", "nsenter", "unshare", "tc")


def multinode_missing() -> str | None:
    """Why the multi-node Slurm cannot start here (None when it can)."""
    why = slurm_missing()
    missing = [b for b in MULTI_BINARIES if shutil.which(b, path=SEARCH_PATH) is None]
    if why is None and missing:
        why = f"{', '.join(missing)} not found: apt-get install iproute2 util-linux (or run .ci/run)"
    if (
        why is None
        and subprocess.run(["ip", "netns", "list"], capture_output=True, timeout=10).returncode != 0
    ):
        why = "`ip netns` does not work here (no network namespaces: a container without CAP_SYS_ADMIN?)"
    return why
