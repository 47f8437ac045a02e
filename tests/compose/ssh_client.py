"""A real SSH client (paramiko) with timeouts: run a command, probe which auth methods the server allows."""

from __future__ import annotations

import socket

import paramiko


def run(
    port: int, key: paramiko.PKey, command: str, user: str = "dev", timeout: float = 120
) -> tuple[int, str, str]:
    """Log in with `key` and run `command`; return (exit status, stdout, stderr)."""
    client = paramiko.SSHClient()
    client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
    try:
        client.connect(
            "127.0.0.1",
            port=port,
            username=user,
            pkey=key,
            timeout=30,
            banner_timeout=30,
            auth_timeout=30,
            allow_agent=False,
            look_for_keys=False,
        )
        _, stdout, stderr = client.exec_command(command, timeout=timeout)
        out, err = stdout.read().decode(), stderr.read().decode()
        return stdout.channel.recv_exit_status(), out, err
    finally:
        client.close()


def allowed_auth_methods(port: int, user: str) -> list[str]:
    """The methods the server offers `user` after a `none` attempt (what an attacker sees)."""
    with _transport(port) as transport:
        try:
            transport.auth_none(user)
        except paramiko.BadAuthenticationType as exc:
            return list(exc.allowed_types)
        return ["none"]


def try_password(port: int, user: str, password: str) -> str:
    """Attempt password auth; return how it failed ('refused: ...') or 'accepted'."""
    with _transport(port) as transport:
        try:
            transport.auth_password(user, password)
        except paramiko.BadAuthenticationType as exc:
            return f"refused: method not allowed (allowed {list(exc.allowed_types)})"
        except paramiko.AuthenticationException as exc:
            return f"refused: {exc}"
        return "accepted"


def try_key(port: int, user: str, key: paramiko.PKey) -> str:
    """Attempt public-key auth as `user`; 'accepted' or 'refused: ...'."""
    with _transport(port) as transport:
        try:
            transport.auth_publickey(user, key)
        except paramiko.AuthenticationException as exc:
            return f"refused: {exc}"
        return "accepted"


def answers(port: int) -> bool:
    """Whether an SSH server sends its identification on `port` now (a port the engine publishes accepts the
    connection before sshd listens in the container, then closes it: no banner)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
            sock.settimeout(2)
            return sock.recv(8).startswith(b"SSH-2.0")
    except OSError:
        return False


def host_key_fingerprint(port: int) -> str:
    """SHA256 fingerprint of the server's host key."""
    with _transport(port) as transport:
        return str(transport.get_remote_server_key().fingerprint)


class _transport:
    """A connected, negotiated paramiko Transport that is always closed."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.transport = paramiko.Transport(self.sock)
        self.transport.banner_timeout = 30
        self.transport.auth_timeout = 30

    def __enter__(self) -> paramiko.Transport:
        self.transport.start_client(timeout=30)
        return self.transport

    def __exit__(self, *exc: object) -> None:
        self.transport.close()
        self.sock.close()
