"""The documented deployments, read from their doc files (a doc change is a test change), with their placeholders
filled the way an admin fills them: the install path of envcheck, the node_exporter textfile folder, `OWNER` in an
image name. Every substitution must find its placeholder, so a doc that drops or renames one fails here."""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "docs" / "cluster"
EXAMPLES = ROOT / "docs" / "examples"
INSTALL = "/opt/envcheck/bin/envcheck"  # where docs/cluster.md installs envcheck on a node
TEXTFILE_DIR = "/var/lib/node_exporter/textfile"  # node_exporter's --collector.textfile.directory in the docs
IMAGE_RE = re.compile(r"ghcr\.io/OWNER/envcheck-pytorch:[\w.-]+")


def fill(text: str, placeholders: dict[str, str]) -> str:
    """`text` with each placeholder replaced; a placeholder that is not there is a doc change the test must see."""
    for old, new in placeholders.items():
        assert old in text, (
            f"placeholder {old!r} is gone from the documented command; update the test with the doc"
        )
        text = text.replace(old, new)
    return text


def launcher(folder: Path) -> Path:
    """What an admin installs at /opt/envcheck/bin/envcheck: this checkout's envcheck, run by the test's Python."""
    path = folder / "envcheck"
    path.write_text(
        f"#!/bin/sh\nPYTHONPATH={shlex.quote(str(ROOT))} exec {shlex.quote(sys.executable)} "
        '-m envcheck "$@"\n'
    )
    path.chmod(0o755)
    return path


def node_script(name: str, folder: Path, textfile_dir: Path, typo: tuple[str, str] | None = None) -> Path:
    """docs/cluster/<name> with envcheck's path and the textfile folder filled in (and, for a usage-error case,
    one flag mistyped), written executable into `folder`."""
    text = fill(
        (CLUSTER / name).read_text(), {INSTALL: str(launcher(folder)), TEXTFILE_DIR: str(textfile_dir)}
    )
    if typo is not None:
        text = fill(text, {typo[0]: typo[1]})
    path = folder / name
    path.write_text(text)
    path.chmod(0o755)
    return path


def documented_command(name: str) -> str:
    """The command a script runs (its lines after the comments), joined as the shell joins them."""
    body = [line for line in (CLUSTER / name).read_text().splitlines() if line and not line.startswith("#")]
    return " ".join(" ".join(body).replace("\\ ", " ").split())


def manifest(name: str) -> list[dict[str, Any]]:
    """A manifest's documents."""
    folder = CLUSTER if (CLUSTER / name).exists() else EXAMPLES
    return [d for d in yaml.safe_load_all((folder / name).read_text()) if d]


def npd_rule() -> dict[str, Any]:
    """The node-problem-detector plugin's one rule."""
    rule: dict[str, Any] = json.loads((CLUSTER / "npd-envcheck-plugin.json").read_text())["rules"][0]
    return rule


# A staged 8-GPU node for the node path on this GPU-less machine (the recipe of docs' GUIDE, section 7), in a private
# mount namespace that dies with the command: /dev on a tmpfs with the usual nodes plus nvidia0..N-1, nvidiactl and
# nvidia-uvm; /proc/driver/nvidia with the kernel module's version and one gpus/<bus>/information per GPU; the
# stand-in libcuda.so.1 (tests/staging/libcuda.py: same PCI bus ids) on LD_LIBRARY_PATH, answering as the
# STUB_* variables say. Absolute paths: slurmd starts a prolog with no PATH at all.
STAGE = r"""
set -e
{mount} --make-rprivate /
{mount} -t tmpfs -o mode=755 none /dev
{mknod} -m 666 /dev/null c 1 3; {mknod} -m 666 /dev/zero c 1 5; {mknod} -m 666 /dev/full c 1 7
{mknod} -m 666 /dev/random c 1 8; {mknod} -m 666 /dev/urandom c 1 9; {mknod} -m 666 /dev/tty c 5 0
{ln} -s /proc/self/fd /dev/fd; {ln} -s fd/0 /dev/stdin; {ln} -s fd/1 /dev/stdout; {ln} -s fd/2 /dev/stderr
{mkdir} /dev/shm /dev/pts; {mount} -t tmpfs -o mode=1777 none /dev/shm
{mknod} -m 666 /dev/nvidiactl c 195 255; {mknod} -m 666 /dev/nvidia-uvm c 510 0
{mount} -t tmpfs none /proc/driver
{mkdir} -p /proc/driver/nvidia/gpus
printf 'NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build\n' \
    > /proc/driver/nvidia/version
i=0
for bus in {buses}; do
    {mknod} -m 666 "/dev/nvidia$i" c 195 "$i"
    {mkdir} "/proc/driver/nvidia/gpus/$bus"
    printf 'Model: \t\t NVIDIA H100 80GB HBM3\nBus Location: \t %s\n' "$bus" > "/proc/driver/nvidia/gpus/$bus/information"
    i=$((i + 1))
done
exec "$@"
"""
BUSES = [
    "0000:18:00.0",
    "0000:2a:00.0",
    "0000:3a:00.0",
    "0000:5d:00.0",
    "0000:9a:00.0",
    "0000:ab:00.0",
    "0000:b3:00.0",
    "0000:db:00.0",
]  # the stand-in libcuda's cuDeviceGetPCIBusId answers


def staged_node(folder: Path, libdir: Path, gpus: int = 8, **stub: str) -> str:
    """Shell words that run a command on the staged node: `<these> /path/to/script`."""
    import shutil

    tools = {
        name: shutil.which(name, path="/usr/sbin:/usr/bin:/sbin:/bin")
        for name in ("mount", "mknod", "ln", "mkdir", "unshare", "env")
    }
    missing = [n for n, p in tools.items() if p is None]
    assert not missing, f"util-linux/coreutils missing: {missing}"
    script = folder / "stage-node.sh"
    script.write_text(STAGE.format(buses=" ".join(BUSES[:gpus]), **tools))
    env = " ".join(
        f"{k}={shlex.quote(v)}"
        for k, v in {"LD_LIBRARY_PATH": str(libdir), "STUB_COUNT": str(gpus), **stub}.items()
    )
    return (
        f"{tools['env']} {env} {tools['unshare']} -m --propagation private /bin/sh {shlex.quote(str(script))}"
    )
