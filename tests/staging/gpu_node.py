"""A staged multi-GPU node: everything envcheck reads on a GPU node, built in a private mount namespace.

What is staged (nothing outside the namespace sees it), and only because it cannot exist on this machine:
- sysfs: a tree of NVIDIA PCI functions (vendor 0x10de, class 0x030200) bind-mounted over /sys/bus/pci/devices, all of
  the node's GPUs whatever this process was given (sysfs is not namespaced);
- /dev: a tmpfs with the usual nodes plus nvidiactl, nvidia-uvm and nvidia<minor> for the GPUs this process can
  see (a container gets only its own; a Slurm job keeps all of them, its device cgroup refuses the others);
- /proc/driver/nvidia: a tmpfs with `version` and `gpus/<bus>/information` for every GPU the driver took, as the
  host's procfs lists them; in a toolkit container a second tmpfs mounted exactly there with the given GPUs only
  (libnvidia-container's mount_procfs/mount_procfs_gpu);
- /sys/module: the driver's modules (nvidia, nvidia_uvm, nvidia_modeset), each with initstate "live", or none;
- /dev/kmsg: a regular file of kernel-log records (`prio,seq,usec,-;text`), or none at all;
- /run: a tmpfs (nvidia-persistenced's socket, listened on, when persistence is on, /run/.containerenv in a container, the
  stand-ins' record of who holds the GPUs initialised);
- the driver's libraries: tests/staging/libcuda.py (C) on LD_LIBRARY_PATH and tests/staging/pynvml_stub on
  PYTHONPATH, both answering from this node's state with CUDA's and NVML's real codes;
- DCGM, where a case gives one: a stand-in dcgmi on PATH (tests/staging/dcgmi.py) answering with DCGM's documents.
Real: the mount namespace, the device nodes and the kernel's access checks on them, a real cgroup-v1 device
controller for the Slurm shape (EPERM from the kernel), envcheck's processes, budgets, kills and /proc state.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from tests.staging import dcgmi, host_root
from tests.staging.libcuda import build

ROOT = Path(__file__).resolve().parents[2]
STUB_NVML = Path(__file__).with_name("pynvml_stub")
BUSES = (
    "0000:18:00.0",
    "0000:2a:00.0",
    "0000:3a:00.0",
    "0000:5d:00.0",
    "0000:9a:00.0",
    "0000:ab:00.0",
    "0000:b3:00.0",
    "0000:db:00.0",
)
DRIVER = "580.95.05"
VERSION = (
    f"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {DRIVER}  Release Build  "
    "(dvs-builder@U22-I3-AF03-09-1)  Tue Sep 23 09:11:41 UTC 2025\nGCC version:  gcc version 12.2.0\n"
)
ROOT_COPY = "/run/envcheck-host-root"  # the host root of a host shape (tests/staging/host_root.py)
UVM_MAJOR = 510  # dynamic on a real host; any free major works for a node nothing opens


@dataclass
class Gpu:
    """One GPU of the node: where it sits, and what NVML and libcuda say of it."""

    bus: str
    minor: int
    uuid: str
    nvml: dict[str, Any] = field(
        default_factory=dict
    )  # NVML state overrides (processes, memory_used_mib, lost ...)
    ctx_code: int = 0  # cuCtxCreate's CUresult on this GPU
    in_driver: bool = (
        True  # False: the probe failed at load (on the PCI bus, unknown to the driver, no /dev node)
    )
    bound: str | None = None  # the kernel driver sysfs names for it, when set (e.g. "vfio-pci": a VM's GPU)


@dataclass
class Node:
    """A deployment shape on a node: its GPUs, what this process was given and how, and the driver's state."""

    gpus: list[Gpu]
    given: tuple[int, ...] | None = None  # indexes into gpus this process was given; None: the whole node
    how: str = "host"  # host | toolkit (legacy runtime) | cdi | cgroup (Slurm ConstrainDevices)
    driver: bool = True  # False: no module, no /dev/nvidia*, no /proc/driver/nvidia, no libraries
    persistence: bool = True
    cold_ms_per_gpu: int = 0
    nvml_init_hang: str | None = None  # "D" or "S"
    nvml_init_code: int = 0  # nvmlInit's NVML error code (18: the driver's two halves at different versions)
    cuinit_hang: bool = False
    cuinit_code: int = 0
    kmsg: list[str] | None = field(default_factory=list)  # None: no /dev/kmsg at all
    env: dict[str, str] = field(default_factory=dict)
    mig: bool = False  # every GPU in MIG mode; CUDA then sees one MIG device (the first)
    mig_instances: bool = (
        True  # False: MIG on, but no GPU instance created (NVML lists no MIG device, CUDA none)
    )
    libcuda: bool = True  # False: no libcuda.so.1 in the process (NVIDIA_DRIVER_CAPABILITIES without compute)
    uvm: bool = True  # False: no /dev/nvidia-uvm (the toolkit injects it only with the compute capability)
    nvswitches: int = 4  # an HGX H100 baseboard's NVSwitches, on the PCI bus as NVIDIA bridges (class 0x0680)
    # A stand-in dcgmi's answers (tests/staging/dcgmi.py: command line -> (exit status, output)); None: no dcgmi.
    dcgmi: dict[str, tuple[int, str] | str] | None = None

    def with_(self, **changes: Any) -> Node:
        """A copy with some fields changed."""
        return replace(self, **changes)


def eight_gpus(**per_gpu: dict[str, Any]) -> list[Gpu]:
    """An HGX H100 node's 8 GPUs; `per_gpu` keys 'g3' etc. update that GPU's fields."""
    out = []
    for i, bus in enumerate(BUSES):
        gpu = Gpu(bus, i, f"GPU-{i:08x}-1c2b-4d5e-8f90-a1b2c3d4e5f6")
        for key, value in per_gpu.get(f"g{i}", {}).items():
            setattr(gpu, key, value)
        out.append(gpu)
    return out


def _given(node: Node) -> list[Gpu]:
    return [g for g in node.gpus if g.in_driver] if node.given is None else [node.gpus[i] for i in node.given]


class Staged:
    """A node staged under `folder`: `run(argv)` runs a command inside its private mount namespace."""

    def __init__(self, node: Node, folder: Path, libdir: Path, tree: Path = ROOT) -> None:
        self.node, self.folder, self.libdir, self.tree = (
            node,
            folder,
            libdir,
            tree,
        )  # tree: the envcheck under test
        self.state = folder / "state"
        self.state.mkdir(exist_ok=True)
        self._write()

    def _write(self) -> None:
        node, f = self.node, self.folder
        pci = f / "pci"
        pci.mkdir(exist_ok=True)
        for g in node.gpus:
            (pci / g.bus).mkdir(exist_ok=True)
            (pci / g.bus / "vendor").write_text("0x10de\n")
            (pci / g.bus / "class").write_text("0x030200\n")
            if (
                g.bound and not (pci / g.bus / "driver").is_symlink()
            ):  # sysfs: a link to /sys/bus/pci/drivers/<name>
                (pci / g.bus / "driver").symlink_to(f"../../../bus/pci/drivers/{g.bound}")
        for n in range(node.nvswitches):
            switch = pci / f"0000:{0x05 + n:02x}:00.0"
            switch.mkdir(exist_ok=True)
            (switch / "vendor").write_text("0x10de\n")
            (switch / "class").write_text("0x068000\n")
        audio = pci / (node.gpus[0].bus[:-1] + "1")  # the GPU's audio function: NVIDIA, but not a GPU
        audio.mkdir(exist_ok=True)
        (audio / "vendor").write_text("0x10de\n")
        (audio / "class").write_text("0x040300\n")
        for name, gpus in (
            ("proc-host", [g for g in node.gpus if g.in_driver]),
            ("proc-toolkit", _given(node)),
        ):
            gdir = f / name / "gpus"
            gdir.mkdir(parents=True, exist_ok=True)
            (f / name / "version").write_text(VERSION)
            for g in gpus:
                (gdir / g.bus).mkdir(exist_ok=True)
                (gdir / g.bus / "information").write_text(
                    f"Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 0\nGPU UUID: \t {g.uuid}\nVideo BIOS: \t "
                    f"96.00.99.00.01\nBus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\n"
                    f"Bus Location: \t {g.bus}\nDevice Minor: \t {g.minor}\nGPU Excluded:\t No\n"
                )
        (f / "kmsg").write_text("".join(line + "\n" for line in node.kmsg or []))
        for name in ("nvidia", "nvidia_uvm", "nvidia_modeset") if node.driver else ():
            (f / "modules" / name).mkdir(parents=True, exist_ok=True)
            (f / "modules" / name / "initstate").write_text("live\n")
        (f / "modules").mkdir(exist_ok=True)
        if node.dcgmi is not None:
            dcgmi.install(f / "bin", node.dcgmi)
        gpus = []
        for g in node.gpus:
            if g.in_driver:
                nvml = {"bus": g.bus, "minor": g.minor, "uuid": g.uuid, **g.nvml}
                if node.mig:
                    nvml.setdefault("mig", True)
                    if not node.mig_instances:
                        nvml.setdefault("mig_devices", [])
                gpus.append(nvml)
        (f / "nvml.json").write_text(
            json.dumps(
                {
                    "library": node.driver,
                    "driver": DRIVER,
                    "persistence_daemon": node.persistence,
                    "cold_s_per_gpu": node.cold_ms_per_gpu / 1000,
                    "warm_dir": "/run/stub-gpu-warm",
                    "init_hang": node.nvml_init_hang,
                    **({"init": {"nvml_error": node.nvml_init_code}} if node.nvml_init_code else {}),
                    "gpus": gpus,
                    # GPUs an operator drained (nvmlDeviceModifyDrainState): NVML lists them no more
                    "drained": [g["bus"] for g in gpus if g.get("drained")],
                }
            )
        )

    def _nodes(self) -> list[Gpu]:
        """The /dev/nvidia<minor> nodes this shape has: the given GPUs in a container; every GPU the driver took
        on the host and under a device cgroup (which refuses the others)."""
        node = self.node
        if not node.driver:
            return []
        if node.how in ("toolkit", "cdi"):
            return _given(node)
        return [g for g in node.gpus if g.in_driver]

    def script(self) -> str:
        """The shell steps that build the node inside the namespace, then exec "$@"."""
        node, f = self.node, self.folder
        q = shlex.quote
        steps = [
            "set -e",
            "mount --make-rprivate /",
            "mount -t tmpfs -o mode=755 envcheck-stage-dev /dev",
            "mknod -m 666 /dev/null c 1 3",
            "mknod -m 666 /dev/zero c 1 5",
            "mknod -m 666 /dev/full c 1 7",
            "mknod -m 666 /dev/random c 1 8",
            "mknod -m 666 /dev/urandom c 1 9",
            "mknod -m 666 /dev/tty c 5 0",
            "ln -s /proc/self/fd /dev/fd",
            "ln -s /proc/self/fd/0 /dev/stdin",
            "ln -s /proc/self/fd/1 /dev/stdout",
            "ln -s /proc/self/fd/2 /dev/stderr",
            "mkdir /dev/shm",
            "mount -t tmpfs envcheck-stage-shm /dev/shm",
            f"mount --bind {q(str(f / 'pci'))} /sys/bus/pci/devices",
            # the kernel's module list (probe.modules reads /sys/module/<name>/initstate): the driver's modules
            f"mount --bind {q(str(f / 'modules'))} /sys/module",
            "mount -t tmpfs envcheck-stage-run /run",
            "mkdir -p /run/stub-gpu-warm",
        ]
        if node.kmsg is not None:
            steps.append(f"cp {q(str(f / 'kmsg'))} /dev/kmsg")
        if node.driver:
            steps += [
                "mknod -m 666 /dev/nvidiactl c 195 255",
                *([f"mknod -m 666 /dev/nvidia-uvm c {UVM_MAJOR} 0"] if node.uvm else []),
            ]
            steps += [f"mknod -m 666 /dev/nvidia{g.minor} c 195 {g.minor}" for g in self._nodes()]
            steps += [
                "mount -t tmpfs envcheck-stage-proc /proc/driver",
                f"cp -r {q(str(f / 'proc-host'))} /proc/driver/nvidia",
            ]
            if (
                node.how == "toolkit"
            ):  # the toolkit's own tmpfs, exactly at /proc/driver/nvidia, with the given GPUs
                steps += [
                    "mount -t tmpfs -o mode=0555 tmpfs /proc/driver/nvidia",
                    f"cp -r {q(str(f / 'proc-toolkit'))}/. /proc/driver/nvidia/",
                ]
        if node.persistence and node.driver:
            # nvidia-persistenced's socket, listened on (a socket file alone would be a dead daemon's): a listener
            # that dies with the process it precedes (PR_SET_PDEATHSIG), since the shell execs into it below
            listen = (
                "import ctypes, signal, socket; ctypes.CDLL(None).prctl(1, 9); "
                "s = socket.socket(socket.AF_UNIX); s.bind('/run/nvidia-persistenced/socket'); s.listen(8); "
                "signal.pause()"
            )
            steps += [
                "mkdir /run/nvidia-persistenced",
                f"{q(sys.executable)} -c {q(listen)} &",
                "while [ ! -S /run/nvidia-persistenced/socket ]; do sleep 0.01; done",
            ]
        if node.how in ("toolkit", "cdi"):
            steps.append("touch /run/.containerenv")
        if self.hides_container():
            steps += host_root.steps(ROOT_COPY)
        steps.append('exec "$@"')
        return "\n".join(steps)

    def hides_container(self) -> bool:
        """A host shape staged on a machine that is itself a container (this one has /.dockerenv): the process
        runs in a root without the container's mark, as a process on the host runs."""
        return self.node.how in ("host", "cgroup") and host_root.needed()

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The environment of a process on this node (the toolkit's variables in a container)."""
        node = self.node
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("STUB_", "SLURM", "NVIDIA_", "CUDA_", "ENVCHECK_", "PYTEST", "KUBERNETES_"))
            and k != "container"  # a container runtime's mark: this machine's own, not the staged node's
        }
        env.update(
            PYTHONPATH=os.pathsep.join([str(STUB_NVML), str(self.tree)]),
            STUB_NVML_STATE=str(self.folder / "nvml.json"),
            ENVCHECK_STATE_DIR=str(self.state),
            STUB_WARM_DIR="/run/stub-gpu-warm",
        )
        if node.driver:
            if node.libcuda:
                env["LD_LIBRARY_PATH"] = str(self.libdir)
            cuda = [g for g in node.gpus if g.in_driver]
            if node.mig:
                cuda = cuda[:1] if node.mig_instances else []
            env["STUB_GPUS"] = ",".join(f"{g.bus.split(':')[1]}:{g.minor}" for g in cuda)
            env["STUB_UUIDS"] = ",".join(
                f"{g.bus.split(':')[1]}:{'MIG-' + g.uuid[4:] if node.mig else g.uuid}" for g in cuda
            )
            codes = [f"{g.bus.split(':')[1]}:{g.ctx_code}" for g in node.gpus if g.ctx_code]
            if codes:
                env["STUB_CTX_CODES"] = ",".join(codes)
            if node.cold_ms_per_gpu and not node.persistence:
                env["STUB_COLD_MS_PER_GPU"] = str(node.cold_ms_per_gpu)
            if node.cuinit_hang:
                env["STUB_HANG_INIT"] = "1"
            if node.cuinit_code:
                env["STUB_INIT"] = str(node.cuinit_code)
        if node.how == "toolkit":
            env["NVIDIA_VISIBLE_DEVICES"] = ",".join(g.uuid for g in _given(node))
        elif node.how == "cdi":
            env["NVIDIA_VISIBLE_DEVICES"] = (
                "void"  # nvidia-ctk's CDI spec sets it so the legacy hook stays out
            )
        elif node.how == "cgroup" and node.given is not None:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(len(node.given)))  # Slurm renumbers
        if node.dcgmi is not None:
            env["PATH"] = f"{self.folder / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}"
        env.update(node.env)
        env.update(extra or {})
        return env

    def run(
        self, argv: list[str], env: dict[str, str] | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """Run argv on the staged node (as root, in a fresh private mount namespace)."""
        with self._cgroup() as join:  # joined after the node is built: the device nodes exist before the job
            script = self.script().replace('exec "$@"', join + 'exec "$@"')
            if self.hides_container():
                argv = host_root.chroot_argv(ROOT_COPY, str(self.folder), argv)
            full = ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "staged", *argv]
            return subprocess.run(
                full,
                capture_output=True,
                text=True,
                timeout=timeout,
                env=self.env(env),
                cwd=str(self.folder),
                start_new_session=True,
            )

    def envcheck(
        self, *args: str, env: dict[str, str] | None = None, timeout: float = 120
    ) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
        """`envcheck run ARGS --json -` on the node: the process and its report (results by name)."""
        done = self.run([sys.executable, "-m", "envcheck", "run", *args, "--json", "-"], env, timeout)
        try:
            report = json.loads(done.stdout)
        except ValueError:
            report = {}
        return done, {r["name"]: r for r in report.get("results", [])} | {"_report": report}

    @contextmanager
    def _cgroup(self) -> Iterator[str]:
        """Slurm's ConstrainDevices on cgroup v1: a devices cgroup allowing the usual nodes and the given GPUs'
        minors only; the shell joins it before anything else. Removed afterwards."""
        if self.node.how != "cgroup":
            yield ""
            return
        root = Path("/sys/fs/cgroup/devices")
        if not (root / "devices.deny").exists():
            pytest.skip("no cgroup-v1 devices controller here (cgroup v2 enforces device rules with eBPF)")
        group = root / f"envcheck-stage-{uuid.uuid4().hex[:8]}"
        group.mkdir()
        try:
            (group / "devices.deny").write_text("a")
            for rule in (
                "c 1:* rwm",
                "c 5:* rwm",
                "c 136:* rwm",
                "c 195:255 rwm",
                f"c {UVM_MAJOR}:* rwm",
                *(f"c 195:{g.minor} rwm" for g in _given(self.node)),
            ):
                (group / "devices.allow").write_text(rule)
            yield f"echo $$ > {shlex.quote(str(group / 'cgroup.procs'))}\n"
        finally:
            for _ in range(50):  # the members have exited; the kernel may take a moment to drop them
                try:
                    group.rmdir()
                    break
                except OSError:
                    time.sleep(0.1)


def can_stage() -> str | None:
    """Why a node cannot be staged here (None: it can): root, unshare(1), mknod and a C compiler are needed."""
    if os.geteuid() != 0:
        return "needs root for a private mount namespace and device nodes"
    missing = [t for t in ("unshare", "mknod", "cc") if shutil.which(t) is None]
    return f"needs {', '.join(missing)}" if missing else None


@contextmanager
def staged_node(node: Node, folder: Path, tree: Path = ROOT) -> Iterator[Staged]:
    """Stage `node` under `folder` (the stand-in libcuda built once per folder); `tree`: the checkout whose
    envcheck runs there (another one for a before/after comparison)."""
    why = can_stage()
    if why:
        pytest.skip(why)
    libdir = folder / "lib"
    if not (libdir / "libcuda.so.1").exists():
        libdir.mkdir(parents=True, exist_ok=True)
        build(libdir)
    case = folder / f"node-{uuid.uuid4().hex[:6]}"
    case.mkdir()
    yield Staged(node, case, libdir, tree)
