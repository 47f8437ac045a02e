"""A real multi-node Slurm on one machine: one network, UTS and mount namespace per node (GUIDE section 6).

Layout: a controller namespace `<tag>c` holds a bridge at 10.77.0.1 and runs slurmctld (hostname `ctl`); node
`nI` lives in namespace `<tag>nI`, joined to the bridge by a veth pair (`vI` in the controller, `eth0` in the
node) at 10.77.0.(10+I), and runs its own slurmd with its own hostname and its own /etc/hosts and resolv.conf
(bind-mounted files the tests may edit in place). One munged serves all (a unix socket in the shared folder).
No address is ever added to the host's namespace; every Slurm client runs inside the controller's namespace.
Teardown kills the daemons and every process still inside our namespaces, deletes the namespaces (the veths
and the bridge go with them), removes the folder, and checks that nothing is left.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.cluster.slurm_conf import common_lines

SUBNET = "10.77.0"
CTL_ADDR = f"{SUBNET}.1"
START_TIMEOUT_S = 30.0


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=10)


def node_addr(index: int) -> str:
    """The address of node nINDEX (1-based) inside the fixture's namespaces."""
    return f"{SUBNET}.{10 + index}"


def netns_inode(name: str) -> int:
    return os.stat(f"/run/netns/{name}").st_ino


def pids_in_netns(inodes: set[int]) -> list[int]:
    """Every process whose network namespace is one of `inodes`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            link = os.readlink(entry / "ns" / "net")
        except OSError:
            continue
        if link.startswith("net:[") and int(link[5:-1]) in inodes:
            found.append(int(entry.name))
    return found


@dataclass
class MultiCluster:
    """n nodes n1..nN, each a slurmd in its own namespaces; `run` is a Slurm client in the controller's."""

    dir: Path
    tag: str
    size: int
    env: dict[str, str]
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    inodes: set[int] = field(default_factory=set)
    started_in_s: float = 0.0

    @property
    def ctl_ns(self) -> str:
        return f"{self.tag}c"

    @property
    def nodes(self) -> list[str]:
        return [f"n{i}" for i in range(1, self.size + 1)]

    def node_ns(self, node: str) -> str:
        return f"{self.tag}{node}"

    def namespaces(self) -> list[str]:
        return [self.ctl_ns, *(self.node_ns(n) for n in self.nodes)]

    def hosts_file(self, node: str) -> Path:
        return self.dir / "etc" / f"hosts-{node}"

    def hosts_text(self, drop: tuple[str, ...] = ()) -> str:
        lines = ["127.0.0.1 localhost", f"{CTL_ADDR} ctl"]
        for i, node in enumerate(self.nodes, 1):
            if node not in drop:
                lines += [f"{node_addr(i)} {node}", f"::ffff:{node_addr(i)} {node}"]
        return "\n".join(lines) + "\n"

    def write_hosts(self, node: str, drop: tuple[str, ...] = ()) -> None:
        """Rewrite node's /etc/hosts in place (a bind mount follows the inode, so no rename), minus `drop`."""
        with self.hosts_file(node).open("r+") as f:
            f.truncate(0)
            f.write(self.hosts_text(drop))

    def set_prolog(self, body: str) -> None:
        """Replace the Prolog script every node runs (atomically: a slurmd may be reading it)."""
        tmp = self.dir / "prolog.sh.tmp"
        tmp.write_text(
            f"#!/bin/sh\nexec >>{self.dir}/prolog-$SLURMD_NODENAME.log 2>&1\n"
            f"export ENVCHECK_TEST_DIR={self.dir}\n{body}\n"
        )  # the prologs' state files stay here
        tmp.chmod(0o755)
        tmp.replace(self.dir / "prolog.sh")

    def client(self, *cmd: str) -> list[str]:
        """`cmd` as a Slurm client inside the controller's network namespace."""
        return ["nsenter", f"--net=/run/netns/{self.ctl_ns}", *cmd]

    def run(
        self, *cmd: str, timeout: float = 60, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.client(*cmd),
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def in_node(self, node: str, *cmd: str, timeout: float = 10) -> subprocess.CompletedProcess[str]:
        """Run `cmd` in node's network namespace (tc, ip link...), failing loudly."""
        return subprocess.run(
            ["nsenter", f"--net=/run/netns/{self.node_ns(node)}", *cmd],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
        )

    def states(self) -> dict[str, str]:
        out = self.run("sinfo", "-h", "-N", "-o", "%N %T").stdout.split("\n")
        return dict(line.split() for line in out if len(line.split()) == 2)

    def reasons(self) -> dict[str, str]:
        out = self.run("sinfo", "-R", "-h", "-N", "-o", "%N|%E").stdout.split("\n")
        return dict(line.split("|", 1) for line in out if "|" in line)

    def wait_states(self, want: dict[str, str], timeout: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while {n: (got := self.states()).get(n) for n in want} != want:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"nodes are {got}, not {want}, after {timeout:g}s; logs in {self.dir}/log"
                )
            time.sleep(0.2)

    def resume_all(self) -> None:
        """Undo drains so the next test starts from idle nodes."""
        bad = [n for n, s in self.states().items() if s != "idle"]
        for node in bad:
            self.run("scontrol", "update", f"NodeName={node}", "State=RESUME")
        self.wait_states(dict.fromkeys(self.nodes, "idle"))


def config(c: MultiCluster) -> str:
    """slurm.conf: the single-node settings, a controller at 10.77.0.1, and one NodeName per namespace."""
    d = c.dir
    nodes = "\n".join(
        f"NodeName={n} NodeAddr={node_addr(i)} CPUs=2 RealMemory=1000 State=UNKNOWN"
        for i, n in enumerate(c.nodes, 1)
    )
    return f"""ClusterName=envcheck
SlurmctldHost=ctl({CTL_ADDR})
{common_lines(d, "%n")}{nodes}
PartitionName=debug Nodes={",".join(c.nodes)} Default=YES MaxTime=INFINITE State=UP
"""


def _daemon(c: MultiCluster, ns: str, hostname: str, hosts: Path, cmd: list[str], log: int) -> None:
    """Start `cmd` in namespace `ns` with its own hostname, /etc/hosts and resolv.conf, in its own session."""
    wrap = (
        'hostname "$H" && mount --bind "$HOSTS" /etc/hosts && mount --bind "$RESOLV" /etc/resolv.conf '
        '&& exec "$@"'
    )
    env = {**c.env, "H": hostname, "HOSTS": str(hosts), "RESOLV": str(c.dir / "etc" / "resolv.conf")}
    c.procs.append(
        subprocess.Popen(
            [
                "nsenter",
                f"--net=/run/netns/{ns}",
                "unshare",
                "--uts",
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                wrap,
                "sh",
                *cmd,
            ],
            env=env,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    )


def _network(c: MultiCluster) -> None:
    ctl = c.ctl_ns
    _ip("netns", "add", ctl)
    c.inodes.add(netns_inode(ctl))
    _ip("-n", ctl, "link", "set", "lo", "up")
    _ip("-n", ctl, "link", "add", "br0", "type", "bridge")
    _ip("-n", ctl, "addr", "add", f"{CTL_ADDR}/24", "dev", "br0")
    _ip("-n", ctl, "link", "set", "br0", "up")
    for i, node in enumerate(c.nodes, 1):
        ns = c.node_ns(node)
        _ip("netns", "add", ns)
        c.inodes.add(netns_inode(ns))
        _ip("-n", ctl, "link", "add", f"v{i}", "type", "veth", "peer", "name", "eth0", "netns", ns)
        _ip("-n", ctl, "link", "set", f"v{i}", "master", "br0", "up")
        _ip("-n", ns, "link", "set", "lo", "up")
        _ip("-n", ns, "addr", "add", f"{node_addr(i)}/24", "dev", "eth0")
        _ip("-n", ns, "link", "set", "eth0", "up")


def start(d: Path, size: int, env: dict[str, str]) -> MultiCluster:
    """Bring up `size` nodes in folder `d`; the caller must call `stop` (also when this raises)."""
    began = time.monotonic()
    c = MultiCluster(
        d,
        tag=f"ec{os.getpid() % 100000}{secrets.token_hex(2)}",
        size=size,
        env={**env, "SLURM_CONF": str(d / "slurm.conf")},
    )
    for sub in ("state", "spool", "log", "munge", "etc"):
        (d / sub).mkdir(mode=0o700)
    (d / "etc" / "resolv.conf").write_text("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")
    for node in ("ctl", *c.nodes):
        c.hosts_file(node).write_text(c.hosts_text())
    key = d / "munge" / "munge.key"
    key.write_bytes(secrets.token_bytes(1024))
    key.chmod(0o600)
    (d / "slurm.conf").write_text(config(c))
    c.set_prolog("exit 0")
    _network(c)
    log = os.open(d / "log" / "daemons.out", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        m = d / "munge"
        c.procs.append(
            subprocess.Popen(
                [
                    "munged",
                    "-F",
                    "--force",
                    f"--key-file={key}",
                    f"--socket={m}/socket",
                    f"--pid-file={m}/pid",
                    f"--log-file={m}/log",
                    f"--seed-file={m}/seed",
                ],
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (m / "socket").exists():
            if c.procs[0].poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"munged did not start: see {m}/log")
            time.sleep(0.05)
        _daemon(c, c.ctl_ns, "ctl", c.hosts_file("ctl"), ["slurmctld", "-D", "-i"], log)
        for node in c.nodes:
            _daemon(c, c.node_ns(node), node, c.hosts_file(node), ["slurmd", "-D", "-N", node], log)
    finally:
        os.close(log)
    c.wait_states(dict.fromkeys(c.nodes, "idle"))
    c.started_in_s = time.monotonic() - began
    return c


def _terminate(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)


def leftovers(c: MultiCluster) -> list[str]:
    """What of this cluster still exists: namespaces, processes in them, daemons, the folder."""
    out = subprocess.run(
        ["ip", "netns", "list"], capture_output=True, text=True, timeout=10, check=True
    ).stdout
    left = [f"netns {line.split()[0]}" for line in out.splitlines() if line.split()[0] in c.namespaces()]
    left += [f"pid {pid} in our namespaces" for pid in pids_in_netns(c.inodes)]
    left += [f"daemon pid {p.pid}" for p in c.procs if p.poll() is None]
    left += [f"folder {c.dir}"] if c.dir.exists() else []
    return left


def stop(c: MultiCluster) -> None:
    """Stop the daemons (slurmds, slurmctld, munged last), kill what is left in our namespaces, delete them."""
    for proc in reversed(c.procs[1:]):
        _terminate(proc)
    for _ in range(50):  # slurmstepd and tasks live in their own sessions: find them by namespace
        pids = pids_in_netns(c.inodes)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)
    if c.procs:
        _terminate(c.procs[0])
    for ns in c.namespaces():
        subprocess.run(["ip", "netns", "delete", ns], capture_output=True, timeout=10, check=False)
    shutil.rmtree(c.dir, ignore_errors=True)
