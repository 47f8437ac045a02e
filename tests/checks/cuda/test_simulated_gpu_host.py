"""The CUDA diagnosis end to end on a simulated GPU host: `envcheck run --only cuda.available` reads a real /dev,
a real /proc/driver/nvidia/version and a real dlopen'ed libcuda.so.1, all staged in a private mount namespace
(the recipe in shared/GUIDE.md).

What is simulated, and why: this machine has no GPU and no NVIDIA driver. So, inside `unshare -m` (root only),
/dev is a tmpfs holding the usual nodes plus the case's /dev/nvidia* character nodes (major 195, nvidia-uvm on
its own major), /proc/driver is a tmpfs holding the driver's version file, and libcuda.so.1 is a stub compiled
here from C that answers cuDriverGetVersion and cuInit as the case needs. A stub cannot fool cudart (it needs
private export tables), so torch is patched at its own boundary by a sitecustomize: torch.version.cuda is the
case's CUDA and torch.cuda.is_available() emits the exact warning real torch emitted in the cited issue and
returns False. Everything after that boundary is envcheck's real capture and diagnosis, in its real worker.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.checks.cuda.test_cuda_codes import E802, E803, E999, PROC_VERSION
from tests.helpers import ROOT

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="needs root and unshare for a private mount namespace",
)

STUB = """
int cuDriverGetVersion(int *v) {{ *v = {driver_cuda}; return 0; }}
int cuInit(unsigned int flags) {{ (void)flags; return {cu_init}; }}
"""

SITECUSTOMIZE = """
import warnings
import torch
torch.version.cuda = {torch_cuda!r}
def _is_available():
    warnings.warn({warning!r}, UserWarning)
    return False
torch.cuda.is_available = _is_available
"""

# The namespace: a fresh /dev with the basic nodes and the case's NVIDIA nodes, and /proc/driver/nvidia.
SETUP = """
set -e
mount -t tmpfs -o mode=755 none /dev
for spec in "null 1 3" "zero 1 5" "full 1 7" "random 1 8" "urandom 1 9" "tty 5 0"; do
    read -r name major minor <<< "$spec"; mknod -m 666 "/dev/$name" c "$major" "$minor"
done
ln -s /proc/self/fd /dev/fd; ln -s fd/0 /dev/stdin; ln -s fd/1 /dev/stdout; ln -s fd/2 /dev/stderr
mkdir /dev/shm /dev/pts; mount -t tmpfs -o mode=1777 none /dev/shm
for node in {nodes}; do mknod -m 666 /dev/${{node%%:*}} c $(echo ${{node#*:}} | tr , ' '); done
mount -t tmpfs none /proc/driver
mkdir /proc/driver/nvidia
printf '%s\\n' "$PROC_VERSION" > /proc/driver/nvidia/version
exec "$@"
"""


def _run_case(
    tmp_path: Path,
    *,
    warning: str,
    cu_init: int,
    nodes: list[str],
    driver: str = "580.95.05",
    kernel: str | None = None,
    driver_cuda: int = 13000,
    torch_cuda: str = "13.0",
) -> dict[str, Any]:
    """`envcheck run --only cuda.available` in the staged namespace: libcuda `driver`, kernel module `kernel`."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the stand-in libcuda")
    lib = tmp_path / "lib"
    lib.mkdir()
    (tmp_path / "stub.c").write_text(STUB.format(driver_cuda=driver_cuda, cu_init=cu_init))
    subprocess.run(
        [cc, "-shared", "-fPIC", "-o", str(lib / f"libcuda.so.{driver}"), str(tmp_path / "stub.c")],
        check=True,
        timeout=60,
    )
    (lib / "libcuda.so.1").symlink_to(f"libcuda.so.{driver}")  # as the driver installs it
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        textwrap.dedent(SITECUSTOMIZE.format(torch_cuda=torch_cuda, warning=warning))
    )
    script = tmp_path / "setup.sh"
    script.write_text(SETUP.format(nodes=" ".join(nodes)))
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LD_LIBRARY_PATH": str(lib),
        "PYTHONPATH": f"{site}{os.pathsep}{ROOT}",
        "HOME": str(tmp_path),
        "TMPDIR": str(tmp_path),
        "PROC_VERSION": PROC_VERSION.format(v=kernel or driver),
    }
    done = subprocess.run(
        [
            "unshare",
            "-m",
            "--propagation",
            "private",
            "bash",
            str(script),
            sys.executable,
            "-m",
            "envcheck",
            "run",
            "--only",
            "cuda.available",
            "--json",
            "-",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 1, (
        done.stdout + done.stderr
    )  # a GPU host whose CUDA does not work: strict fails
    (result,) = json.loads(done.stdout)["results"]
    assert result["status"] == "fail", result
    return dict(result)


NODES = ["nvidiactl:195,255", "nvidia0:195,0", "nvidia-uvm:510,0", "nvidia-uvm-tools:510,1"]


def test_802_on_a_simulated_nvswitch_host_names_fabricmanager(tmp_path: Path) -> None:
    """torch's warning text from https://github.com/hiyouga/LlamaFactory/issues/7888; cuInit answers 802."""
    result = _run_case(tmp_path, warning=E802, cu_init=802, nodes=NODES)
    assert (
        "CUDA error 802" in result["summary"] and "fabric registration is not complete" in result["summary"]
    ), result
    assert "systemctl enable --now nvidia-fabricmanager" in result["remediation"]
    assert result["fault_class"] == "node"
    layers = [f["layer"] for f in result["measured"]["findings"]]
    assert layers == ["cuda-init"], layers  # the driver (580 for CUDA 13.0) is not blamed


def test_999_on_a_simulated_host_without_nvidia_uvm_names_the_module(tmp_path: Path) -> None:
    """torch's words for 999 from https://github.com/pytorch/pytorch/issues/88639; /dev/nvidia-uvm is really
    absent from the namespace's /dev, and the stub libcuda's file name matches the kernel module's version."""
    result = _run_case(tmp_path, warning=E999, cu_init=999, nodes=NODES[:2])
    assert "/dev/nvidia-uvm is missing" in result["summary"], result
    assert "modprobe nvidia-uvm" in result["remediation"]
    assert result["fault_class"] == "node"


@pytest.mark.parametrize("warning, code", [(E999, 999), (E803, 803)])
def test_a_simulated_host_upgraded_without_reboot_names_the_version_skew(
    tmp_path: Path, warning: str, code: int
) -> None:
    """The kernel module says 570.86.15 (/proc/driver/nvidia/version) while the libcuda.so.1 that loads is
    580.95.05: the driver was upgraded and the host not rebooted. The root cause comes first, and the old
    module is not held to CUDA 13's 580 floor ("upgrade the driver" would send the user in a circle). 803's
    text: https://github.com/easydiffusion/easydiffusion/issues/379."""
    result = _run_case(tmp_path, warning=warning, cu_init=code, nodes=NODES, kernel="570.86.15")
    assert [f["layer"] for f in result["measured"]["findings"]] == ["cuda-init"], result
    assert f"CUDA error {code}" in result["summary"]
    assert "570.86.15" in result["summary"] and "580.95.05" in result["summary"], result
    assert "reboot" in result["remediation"]
