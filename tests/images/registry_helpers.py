"""A real registry for the publish tests: Debian's docker-registry (distribution 2.8) on a random 127.0.0.1
port, its storage and config under the test's tmp dir; a TCP proxy that cuts the connection mid-push."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.helpers.ports import free_port

MANIFEST_TYPES = ", ".join(
    [
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
    ]
)


def require_tools(*names: str) -> None:
    """Skip visibly when a tool is missing; fail instead under ENVCHECK_REQUIRE_DOCKER=1 (CI)."""
    missing = [name for name in names if shutil.which(name) is None]
    if missing:
        why = (
            f"{', '.join(missing)} not installed (apt-get install docker-registry skopeo gnupg; .ci/run does)"
        )
        if os.environ.get("ENVCHECK_REQUIRE_DOCKER") == "1":
            pytest.fail(why)
        pytest.skip(why)


@contextmanager
def running_registry(root: Path) -> Iterator[str]:
    """Start docker-registry on 127.0.0.1:<random>; yield `127.0.0.1:PORT`; stop it and wait for it."""
    require_tools("docker-registry", "skopeo")
    port = free_port()
    root.mkdir(parents=True, exist_ok=True)
    config = root / "config.yml"
    config.write_text(
        f"version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {root}/data\n"
        f"  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n"
    )
    log = (root / "registry.log").open("w")
    proc = subprocess.Popen(["docker-registry", "serve", str(config)], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while not _answers(f"http://127.0.0.1:{port}/v2/"):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"docker-registry did not come up: {(root / 'registry.log').read_text()[-500:]}")
            time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return bool(resp.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def tag_digest(registry: str, name: str, tag: str) -> str | None:
    """What the registry itself says `name:tag` is (HEAD manifests -> Docker-Content-Digest); None if absent."""
    req = urllib.request.Request(
        f"http://{registry}/v2/{name}/manifests/{tag}", method="HEAD", headers={"Accept": MANIFEST_TYPES}
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return str(resp.headers["Docker-Content-Digest"])
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise


def get_json(registry: str, path: str) -> dict:
    req = urllib.request.Request(f"http://{registry}/v2/{path}", headers={"Accept": MANIFEST_TYPES})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


def get_blob(registry: str, name: str, digest: str) -> bytes:
    with urllib.request.urlopen(f"http://{registry}/v2/{name}/blobs/{digest}", timeout=10) as resp:
        return bytes(resp.read())


class CuttingProxy:
    """Forwards 127.0.0.1:<port> to the registry and cuts both sides as soon as the client sends a manifest
    PUT: the layers arrive, the push never completes (a registry that fails mid-push)."""

    def __init__(self, upstream: str) -> None:
        host, port = upstream.split(":")
        self.upstream = (host, int(port))
        self.server = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.server.getsockname()[1]}"
        self.cuts = 0
        self._stop = False
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.upstream)
            threading.Thread(target=self._pipe, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, False), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, inspect: bool) -> None:
        try:
            while data := src.recv(65536):
                if inspect and data.startswith(b"PUT ") and b"/manifests/" in data.split(b"\r\n", 1)[0]:
                    self.cuts += 1
                    break
                dst.sendall(data)
        except OSError:
            pass
        for sock in (src, dst):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def close(self) -> None:
        self._stop = True
        self.server.close()
