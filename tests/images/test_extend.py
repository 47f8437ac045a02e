"""docs/extend.md as written: its Dockerfile (FROM the runtime image, `pip install einops`) builds on the runtime image
this suite builds (standing in for the tag the page names), keeps the image's torch through the constraint file, and
its `docker run ... envcheck run --allow-cpu --only image.versions` line passes; the twin (a layer that asks pip for
another torch) fails the build with pip's constraint conflict. Real: the engine, BuildKit, pip and the index, the
image, envcheck inside it. One substitution beyond the tag: where this machine's TLS needs its CA bundle, the RUN line
gets it as a BuildKit secret, as every build of the project does (docs/images.md, "Proxy")."""

from __future__ import annotations

import re
import shlex
import subprocess
import uuid
from pathlib import Path

import pytest

from envcheck.images.engine import docker_binary
from tests.helpers import ROOT
from tests.helpers.containers import CA_BUNDLE

pytestmark = [pytest.mark.docker, pytest.mark.slow]
PAGE = (ROOT / "docs" / "extend.md").read_text()
DOCUMENTED = "envcheck:2.14.1-cuda13.0-runtime"


def dockerfile() -> str:
    (block,) = re.findall(r"```dockerfile\n(.*?)```", PAGE, flags=re.S)
    return block


def commands() -> list[str]:
    block = PAGE.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def with_ca(text: str) -> str:
    """The RUN line with the machine's CA bundle as a secret (it never reaches a layer)."""
    return re.sub(
        r"^RUN (.*)$",
        lambda m: (
            "RUN --mount=type=secret,id=ca,required=false,uid=1000 "
            + f"sh -c '[ -s /run/secrets/ca ] && export PIP_CERT=/run/secrets/ca; {m.group(1)}'"
        ),
        text,
        flags=re.M,
    )


def build(context: Path, text: str, tag: str) -> subprocess.CompletedProcess[str]:
    (context / "Dockerfile").write_text(text)
    secret = ["--secret", f"id=ca,src={CA_BUNDLE}"] if CA_BUNDLE.is_file() else []
    return subprocess.run(
        [docker_binary(), "build", *secret, "-t", tag, str(context)],
        capture_output=True,
        text=True,
        timeout=900,
        env={"DOCKER_BUILDKIT": "1", "PATH": "/usr/bin:/bin"},
    )


def test_the_page_extends_the_default_image() -> None:
    assert dockerfile().splitlines()[0] == f"FROM {DOCUMENTED}"
    assert commands() == [
        "docker build -t my-trainer .",
        "docker run --rm --ipc=host --ulimit stack=67108864 my-trainer envcheck run --allow-cpu --only image.versions",
    ]


def test_the_extended_image_keeps_its_torch_and_the_twin_cannot_swap_it(
    runtime_image: str, tmp_path: Path
) -> None:
    tag = f"envcheck-extend-{uuid.uuid4().hex[:8]}"
    try:
        made = build(tmp_path, with_ca(dockerfile().replace(DOCUMENTED, runtime_image)), tag)
        assert made.returncode == 0, made.stderr[-3000:]
        run = shlex.split(commands()[1].replace("my-trainer", tag))
        done = subprocess.run([docker_binary(), *run[1:]], capture_output=True, text=True, timeout=600)
        assert done.returncode == 0 and "image.versions" in done.stdout and "PASS" in done.stdout, (
            done.stdout[-3000:]
        )
        swap = dockerfile().replace(DOCUMENTED, runtime_image).replace("einops", "einops torch==2.10.0")
        refused = build(tmp_path, with_ca(swap), tag + "-swap")
        assert refused.returncode != 0 and "conflict" in (refused.stdout + refused.stderr).lower(), (
            refused.stderr[-3000:]
        )
    finally:
        subprocess.run([docker_binary(), "rmi", "-f", tag, tag + "-swap"], capture_output=True, timeout=120)
