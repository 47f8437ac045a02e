"""docs/dev-containers.md's "JupyterLab in one line", run as written with three substitutions a reader also makes:
the test's jupyter image for `envcheck:latest-jupyter` (the tag `make image TARGET=jupyter` gives the latest row; the
suite builds the CI row), a free port for 8888 (the suite may run beside a real JupyterLab) and a container name of
its own; `$(id -u)` runs as root here, which the page says the container refuses, so HOST_UID/HOST_GID are the test's
non-root user. Real: the Docker engine, the entrypoint, JupyterLab, HTTP."""

from __future__ import annotations

import os
import re
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.compose import jupyter_client
from tests.compose.images import DevImages
from tests.compose.stack import docker
from tests.helpers import ROOT
from tests.helpers.ports import free_port

pytestmark = [pytest.mark.docker, pytest.mark.slow]
PAGE = (ROOT / "docs" / "dev-containers.md").read_text()
TOKEN_LINE = "generated token for this start: "
HOST_ID = 4321


def one_line_block() -> list[str]:
    part = PAGE.split("## JupyterLab in one line", 1)[1]
    return [ln for ln in part.split("```bash\n", 1)[1].split("```", 1)[0].splitlines() if ln.strip()]


def test_the_page_gives_one_docker_run_and_where_the_token_is() -> None:
    run, logs = one_line_block()
    assert (
        run.startswith("docker run --rm -d --name jupyter -p 127.0.0.1:8888:8888 ") and "compose" not in run
    )
    assert (
        run.endswith(" envcheck:latest-jupyter")
        and logs == "docker logs jupyter 2>&1 | grep 'generated token'"
    )


def test_the_one_line_jupyter_answers_with_its_token_only(dev_images: DevImages, tmp_path: Path) -> None:
    run, logs = one_line_block()
    name, port = f"envcheck-oneline-{uuid.uuid4().hex[:8]}", free_port()
    os.chown(tmp_path, HOST_ID, HOST_ID)
    line = (
        run.replace("--name jupyter", f"--name {name}")
        .replace("127.0.0.1:8888:8888", f"127.0.0.1:{port}:8888")
        .replace("envcheck:latest-jupyter", dev_images.ref("jupyter"))
    )
    env = {**os.environ, "PWD": str(tmp_path)}
    fake_id = f'id() {{ case "$1" in -u|-g) echo {HOST_ID};; esac; }}; '  # the reader's own non-root uid/gid
    try:
        started = subprocess.run(
            ["bash", "-c", fake_id + line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
        assert started.returncode == 0, started.stderr
        token = ""
        for _ in range(90):
            got = subprocess.run(
                ["bash", "-c", logs.replace("jupyter", name, 1)], capture_output=True, text=True, timeout=30
            ).stdout
            found = re.search(re.escape(TOKEN_LINE) + r"([0-9a-f]+)", got)
            try:
                if found and jupyter_client.api_status(port, token=found.group(1)) == 200:
                    token = found.group(1)
                    break
            except OSError:  # the server is not listening yet
                pass
            time.sleep(2)
        assert token, docker("logs", name, timeout=30).stdout
        assert jupyter_client.api_status(port) == 403
        out = jupyter_client.execute(
            port, token, "import os, pathlib; pathlib.Path('/workspace/x').write_text('1')"
        )
        assert out == "" and (tmp_path / "x").stat().st_uid == HOST_ID
    finally:
        docker("rm", "-f", name, timeout=60)
