"""The `jupyter` service, brought up by compose (CPU override), used by real HTTP and kernel clients.

Not verifiable here (no GPU): that the kernel sees a GPU under the GPU reservation. The kernel test
prints torch.cuda.is_available() so a GPU host shows it; it only asserts it on a GPU host.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest

from tests.compose import jupyter_client
from tests.compose.images import DevImages
from tests.compose.stack import Project, docker, entrypoint_processes, project
from tests.helpers.ports import free_port

pytestmark = [pytest.mark.docker, pytest.mark.slow]
TOKEN_LINE = "generated token for this start: "
HOST_ID = 4321  # the host user the tests pretend to be (HOST_UID/HOST_GID)


def _up(images: DevImages, workspace: Path, *files: str, **env: str):  # type: ignore[no-untyped-def]
    os.chown(workspace, HOST_ID, HOST_ID)  # a workspace owned by the host user, as on a laptop
    return project(
        *files,
        **images.env(),
        JUPYTER_PORT=str(free_port()),
        ENVCHECK_WORKSPACE=str(workspace),
        HOST_UID=str(HOST_ID),
        HOST_GID=str(HOST_ID),
        **env,
    )


def _start(proj: Project) -> int:
    """Up, and answering HTTP on its port (test_token_from_env_guards_api_and_kernel_runs_torch waits for the
    image's HEALTHCHECK instead, which proves it)."""
    return proj.up_answering("jupyter", "JUPYTER_PORT", jupyter_client.answers)


def test_token_from_env_guards_api_and_kernel_runs_torch(dev_images: DevImages, tmp_path: Path) -> None:
    token = secrets.token_hex(24)
    with _up(dev_images, tmp_path, JUPYTER_TOKEN=token) as proj:
        proj.up("jupyter")
        proj.wait_healthy("jupyter")  # the image's HEALTHCHECK says healthy (the other tests: _start)
        port = int(proj.env["JUPYTER_PORT"])
        assert jupyter_client.api_status(port) == 403
        assert jupyter_client.api_status(port, token="wrong-" + token) == 403
        assert jupyter_client.api_status(port, token=token) == 200
        try:
            out = jupyter_client.execute(
                port,
                token,
                (
                    "import os, torch, pathlib\n"
                    "pathlib.Path('/workspace/from-kernel.txt').write_text('hi')\n"
                    "print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'uid', os.getuid())\n"
                ),
            )
        except Exception as exc:  # whatever went wrong with the kernel, the server's log says why
            raise AssertionError(f"{exc}\n--- jupyter's log ---\n{proj.logs('jupyter')}") from None
        print(out)
        assert out.startswith(f"torch {docker_torch_version(dev_images)} cuda ")
        assert out.rstrip().endswith(f"uid {HOST_ID}")
        assert (tmp_path / "from-kernel.txt").stat().st_uid == HOST_ID  # HOST_UID owns what dev writes
        assert token not in proj.logs("jupyter")  # a provided token is never echoed


def test_generated_token_is_printed_once_and_works(dev_images: DevImages, tmp_path: Path) -> None:
    with _up(dev_images, tmp_path) as proj:
        _start(proj)
        logs = proj.logs("jupyter")
        lines = [line for line in logs.splitlines() if TOKEN_LINE in line]
        assert len(lines) == 1, logs
        token = lines[0].split(TOKEN_LINE, 1)[1].strip()
        assert len(token) >= 32 and logs.count(token) == 1
        port = int(proj.env["JUPYTER_PORT"])
        assert jupyter_client.api_status(port) == 403
        assert jupyter_client.api_status(port, token=token) == 200


def test_token_file_secret_is_the_only_token(dev_images: DevImages, tmp_path: Path) -> None:
    token = secrets.token_hex(24)
    secret = tmp_path / "jupyter_token"
    secret.write_text(token + "\n")
    secret.chmod(0o600)  # readable by the host user only: the entrypoint reads it before dropping root
    with _up(
        dev_images,
        tmp_path,
        "compose.yaml",
        "compose.cpu.yaml",
        "compose.secrets.yaml",
        JUPYTER_TOKEN_SECRET=str(secret),
        SSH_AUTHORIZED_KEYS_SECRET=os.devnull,
        JUPYTER_TOKEN="ignored-by-the-secrets-override",
    ) as proj:
        _start(proj)
        port = int(proj.env["JUPYTER_PORT"])
        assert jupyter_client.api_status(port, token=token) == 200
        for other in ("ignored-by-the-secrets-override", token[:-1], ""):
            assert jupyter_client.api_status(port, token=other) == 403
        assert TOKEN_LINE not in proj.logs("jupyter")
        inspect = docker("inspect", proj.container("jupyter")).stdout
        assert token not in inspect  # the secret is a file, not part of the container's config


def test_empty_token_file_refuses_to_start(dev_images: DevImages, tmp_path: Path) -> None:
    secret = tmp_path / "jupyter_token"
    secret.write_text("\n")
    with _up(
        dev_images,
        tmp_path,
        "compose.yaml",
        "compose.cpu.yaml",
        "compose.secrets.yaml",
        JUPYTER_TOKEN_SECRET=str(secret),
        SSH_AUTHORIZED_KEYS_SECRET=os.devnull,
    ) as proj:
        proj.up("jupyter")
        assert proj.wait_exit("jupyter") == 78
        logs = proj.logs("jupyter").strip()
        assert (
            logs.splitlines() == [logs] and "JUPYTER_TOKEN_FILE=/run/secrets/jupyter_token is empty" in logs
        )


def test_no_root_process_after_start(dev_images: DevImages, tmp_path: Path) -> None:
    with _up(dev_images, tmp_path, JUPYTER_TOKEN=secrets.token_hex(16)) as proj:
        _start(proj)
        uids = entrypoint_processes(proj.container("jupyter"), str(HOST_ID))
        assert uids[1][1] == "tini" and {uid for uid, _ in uids.values()} == {HOST_ID}, uids


def docker_torch_version(images: DevImages) -> str:
    """torch.__version__ in the image (the version the kernel must report)."""
    done = docker(
        "run",
        "--rm",
        "--entrypoint",
        "python",
        images.ref("runtime"),
        "-c",
        "import torch; print(torch.__version__)",
        timeout=120,
    )
    return done.stdout.strip()


def test_teardown_leaves_nothing_even_when_the_test_fails(dev_images: DevImages, tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="boom"), _up(dev_images, tmp_path, JUPYTER_TOKEN="x" * 32) as proj:
        proj.up("jupyter")
        assert len(proj.leftovers()) == 3  # container, cache volume, network
        raise RuntimeError("boom")
    assert proj.leftovers() == []


@pytest.mark.gpu
def test_kernel_sees_the_gpu_through_the_compose_reservation(dev_images: DevImages, tmp_path: Path) -> None:
    """GPU hosts only (needs nvidia-container-toolkit): the base compose.yaml, no CPU override."""
    token = secrets.token_hex(24)
    with _up(dev_images, tmp_path, "compose.yaml", JUPYTER_TOKEN=token) as proj:
        _start(proj)
        out = jupyter_client.execute(
            int(proj.env["JUPYTER_PORT"]),
            token,
            (
                "import torch\nprint(torch.cuda.is_available(), torch.cuda.device_count())\n"
                "print((torch.ones(4, device='cuda') * 2).sum().item())\n"
            ),
        )
        available, count = out.splitlines()[0].split()
        assert available == "True" and int(count) >= 1 and out.splitlines()[1] == "8.0", out
