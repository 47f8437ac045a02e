"""The `ssh` service, brought up by compose (CPU override), used by a real SSH client (paramiko).

Not verifiable here (no GPU): GPU access from an SSH session; the session's NVIDIA_*/CUDA_* variables
are asserted, which is what nvidia-container-toolkit and CUDA read.
"""

from __future__ import annotations

import os
from pathlib import Path

import paramiko
import pytest

from tests.compose import ssh_client
from tests.compose.images import DevImages
from tests.compose.stack import Project, entrypoint_processes, project
from tests.helpers.ports import free_port

pytestmark = [pytest.mark.docker, pytest.mark.slow]
HOST_ID = 4321  # the host user the tests pretend to be (HOST_UID/HOST_GID)
Key = tuple[paramiko.PKey, str]


def _up(images: DevImages, workspace: Path, *files: str, **env: str):  # type: ignore[no-untyped-def]
    os.chown(workspace, HOST_ID, HOST_ID)
    return project(
        *files,
        **images.env(),
        SSH_PORT=str(free_port()),
        ENVCHECK_WORKSPACE=str(workspace),
        HOST_UID=str(HOST_ID),
        HOST_GID=str(HOST_ID),
        **env,
    )


def _start(proj: Project) -> int:
    """Up, and answering SSH on its port (test_key_login_runs_torch_and_envcheck_with_the_image_env waits for the
    image's HEALTHCHECK instead, which proves it)."""
    return proj.up_answering("ssh", "SSH_PORT", ssh_client.answers)


def test_key_login_runs_torch_and_envcheck_with_the_image_env(
    dev_images: DevImages, ssh_key: Key, tmp_path: Path
) -> None:
    key, public = ssh_key
    with _up(dev_images, tmp_path, SSH_AUTHORIZED_KEYS=public) as proj:
        proj.up("ssh")
        # the image's HEALTHCHECK says healthy (the other tests wait for SSH's banner)
        proj.wait_healthy("ssh")
        port = int(proj.env["SSH_PORT"])
        rc, out, err = ssh_client.run(
            port,
            key,
            'python -c "import torch, envcheck; print(torch.__version__)" '
            "&& id -u && touch /workspace/from-ssh && env",
        )
        assert rc == 0, err
        lines = out.splitlines()
        assert lines[1] == str(HOST_ID)
        env = dict(line.split("=", 1) for line in lines[2:] if "=" in line)
        assert env["PATH"].startswith("/opt/venv/bin:")
        assert (
            env["NVIDIA_VISIBLE_DEVICES"] == "all" and env["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility"
        )
        assert env["CUDA_CACHE_PATH"] == "/home/dev/.cache/nv" and env["ENVCHECK_IMAGE"] == "1"
        assert "SSH_AUTHORIZED_KEYS" not in env and "HOST_UID" not in env
        assert (tmp_path / "from-ssh").stat().st_uid == HOST_ID
        # An interactive login shell runs /etc/profile, which resets PATH; profile.d restores the image's.
        rc, out, _ = ssh_client.run(port, key, "bash -lc 'echo $PATH; command -v python'")
        assert rc == 0 and out.splitlines() == [env["PATH"], "/opt/venv/bin/python"]


def test_password_and_root_logins_are_refused(dev_images: DevImages, ssh_key: Key, tmp_path: Path) -> None:
    key, public = ssh_key
    with _up(dev_images, tmp_path, SSH_AUTHORIZED_KEYS=public) as proj:
        port = _start(proj)
        assert ssh_client.allowed_auth_methods(port, "dev") == ["publickey"]
        assert ssh_client.try_password(port, "dev", "dev").startswith("refused: method not allowed")
        assert ssh_client.try_password(port, "root", "root").startswith("refused")
        assert ssh_client.try_key(port, "root", key).startswith("refused")  # the very key dev logs in with
        assert ssh_client.try_key(port, "dev", key) == "accepted"
        logs = proj.logs("ssh")
        assert "User root from" in logs and "not allowed" in logs


def test_host_keys_differ_per_container_and_survive_restart(
    dev_images: DevImages, ssh_key: Key, tmp_path: Path
) -> None:
    _, public = ssh_key
    with (
        _up(dev_images, tmp_path, SSH_AUTHORIZED_KEYS=public) as one,
        _up(dev_images, tmp_path, SSH_AUTHORIZED_KEYS=public) as two,
    ):
        port_one, port_two = _start(one), _start(two)
        first = ssh_client.host_key_fingerprint(port_one)
        assert first != ssh_client.host_key_fingerprint(port_two)
        one.compose("restart", "ssh")
        one.wait_answering("ssh", ssh_client.answers, port_one)
        assert ssh_client.host_key_fingerprint(port_one) == first
        one.compose("up", "-d", "--no-build", "--pull", "never", "--force-recreate", "ssh")  # new container,
        one.wait_answering("ssh", ssh_client.answers, port_one)  # same volume
        assert ssh_client.host_key_fingerprint(port_one) == first
        assert one.logs("ssh").count("generated host key") == 0  # the recreated one generated nothing


def test_authorized_keys_from_a_mounted_secret_file(
    dev_images: DevImages, ssh_key: Key, tmp_path: Path
) -> None:
    key, public = ssh_key
    keys_file = tmp_path / "authorized_keys"
    keys_file.write_text(f"# comment\n{public}\n")
    with _up(
        dev_images,
        tmp_path,
        "compose.yaml",
        "compose.cpu.yaml",
        "compose.secrets.yaml",
        SSH_AUTHORIZED_KEYS_SECRET=str(keys_file),
        JUPYTER_TOKEN_SECRET=os.devnull,
    ) as proj:
        port = _start(proj)
        assert ssh_client.run(port, key, "true")[0] == 0


def test_no_key_refuses_to_start_with_one_line(dev_images: DevImages, tmp_path: Path) -> None:
    with _up(dev_images, tmp_path, SSH_AUTHORIZED_KEYS="") as proj:
        proj.up("ssh")
        assert proj.wait_exit("ssh") == 78
        logs = proj.logs("ssh").strip()
        assert logs == (
            "envcheck-ssh: no SSH public key configured, refusing to start: set "
            "SSH_AUTHORIZED_KEYS='ssh-ed25519 AAAA...' or mount your public key file at "
            "/run/secrets/ssh_authorized_keys (docs/dev-containers.md)"
        )


def test_only_dev_runs_after_start(dev_images: DevImages, ssh_key: Key, tmp_path: Path) -> None:
    _, public = ssh_key
    with _up(dev_images, tmp_path, SSH_AUTHORIZED_KEYS=public) as proj:
        _start(proj)
        found = entrypoint_processes(proj.container("ssh"), str(HOST_ID))
        mine = [(name, uid) for uid, name in found.values()]
        assert mine and all(uid == HOST_ID for _, uid in mine), mine
        assert ("tini", HOST_ID) in mine and any(name == "sshd" for name, _ in mine)
