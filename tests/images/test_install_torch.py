"""docker/install-torch.sh as the torch layer's RUN step runs it, with pip, uv and python as stand-ins that log their
arguments (the real installs are proved by the image builds of the Docker tests, which use pip).

Staged: /opt/envcheck-build (a tmpfs over /opt in a private mount namespace, gone with it) and the three commands.
Real: the script and docker/pip-source.sh, which it sources."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers import ROOT

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare for a private /opt"
)
ROW = {
    "TORCH_VERSION": "2.11.0",
    "TORCHVISION_VERSION": "0.26.0",
    "TORCHAUDIO_VERSION": "",
    "CUDA_VERSION": "13.0",
    "TORCH_INDEX_URL": "https://pypi.org/simple",
    "UV_VERSION": "0.13.9",
    "OFFLINE": "0",
}


def installs(tmp_path: Path, installer: str) -> list[list[str]]:
    """The install commands the script ran (each as its arguments), installing with `installer`."""
    stubs, log = tmp_path / "bin", tmp_path / "calls.log"
    stubs.mkdir()
    for tool in ("pip", "uv"):
        (stubs / tool).write_text(f'#!/bin/sh\necho "{tool} $*" >> {log}\n')
    (stubs / "python").write_text("#!/bin/sh\necho 13.0\n")  # torch.version.cuda, as the row says
    for stub in stubs.iterdir():
        stub.chmod(0o755)
    build = "/opt/envcheck-build"
    script = (
        f"set -e; mount -t tmpfs tmpfs /opt; mkdir {build}; "
        f"cp {ROOT}/docker/pip-source.sh {ROOT}/docker/install-torch.sh {build}/; "
        f"exec bash {build}/install-torch.sh"
    )
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "bash", "-c", script],
        env={"PATH": f"{stubs}:/usr/bin:/bin", "INSTALLER": installer, **ROW},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return [line.split() for line in log.read_text().splitlines()]


def test_uv_compiles_torch_to_bytecode_as_pip_does(tmp_path: Path) -> None:
    """The image sets PYTHONDONTWRITEBYTECODE, so nothing in a container writes a .pyc: a torch installed without its
    bytecode is compiled from source again by every `import torch` (each container start, each process)."""
    calls = installs(tmp_path, "uv")
    (torch_install,) = [c for c in calls if c[:3] == ["uv", "pip", "install"]]
    assert "--compile-bytecode" in torch_install and "torch==2.11.0" in torch_install, torch_install


def test_pip_installs_torch_with_its_bytecode(tmp_path: Path) -> None:
    """The healthy twin: pip compiles what it installs unless told --no-compile."""
    (torch_install,) = installs(tmp_path, "pip")
    assert torch_install[:2] == ["pip", "install"] and "torch==2.11.0" in torch_install
    assert "--no-compile" not in torch_install
