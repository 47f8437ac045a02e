"""The README's "build and run an image" lines, run as written against the runtime image this repo builds (the row of
ENVCHECK_TEST_ROW standing in for `envcheck:latest-runtime`, which `make image TARGET=runtime` tags: building the
latest row here too would cost another 6 GB image). Real: the Docker engine, the image, envcheck and torch inside it.
The GPU line needs a GPU host (a visible skip here). That `make image TARGET=runtime` gives that tag is
tests/test_readme.py's."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import uuid

import pytest

from envcheck.images.engine import docker_binary
from tests.helpers import ROOT

pytestmark = [pytest.mark.docker, pytest.mark.slow]
PUBLISHED = "envcheck:latest-runtime"


def _lines() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    block = readme.split("**Build and run an image.**", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    lines = [
        " ".join(line.split())
        for line in block.replace("\\\n", " ").splitlines()
        if line.startswith("docker run ")
    ]
    assert len(lines) == 2 and all(PUBLISHED in line for line in lines)
    return lines


def _run(line: str, image: str) -> subprocess.CompletedProcess[str]:
    """The README line with the built image for the published one, named so that it is removed even on a timeout."""
    name = f"envcheck-readme-{uuid.uuid4().hex[:8]}"
    words = shlex.split(line.replace(PUBLISHED, image))
    argv = [docker_binary(), *words[1:2], "--name", name, *words[2:]]
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=600)
    finally:
        subprocess.run([docker_binary(), "rm", "-f", name], capture_output=True, timeout=60)


def test_the_cpu_line_runs_envcheck_in_the_image_and_passes(runtime_image: str) -> None:
    cpu = _lines()[1]
    assert "--gpus" not in cpu and "memlock" not in cpu and cpu.endswith("envcheck run --allow-cpu")
    done = _run(cpu, runtime_image)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.match(r"OK: \d+ pass", done.stdout.splitlines()[-1]), done.stdout[-3000:]
    assert "CUDA is not available" in done.stdout  # --allow-cpu made "no GPU" a warning that still says why


@pytest.mark.gpu
def test_the_gpu_line_runs_the_image_default_command_on_a_gpu_host(runtime_image: str) -> None:
    if not shutil.which("nvidia-smi"):
        pytest.skip("no NVIDIA GPU on this host: the --gpus line needs one (the CPU line is the test above)")
    done = _run(_lines()[0], runtime_image)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
