"""The test's Jupyter client keeps its deadline against a server that only keeps the websocket alive.

Jupyter Server pings every 30 s; websocket-client's recv() answers pings in its own loop, so a client
that waits with recv() never times out when the kernel does not answer. A CI run hung that way in
tests/compose/test_jupyter.py until the job's limit. The server here is a real TCP websocket peer
(handshake by RFC 6455) that pings every 0.1 s and never answers a request.
"""

from __future__ import annotations

import base64
import hashlib
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from tests.compose import jupyter_client

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


@pytest.fixture
def pinging_server() -> Iterator[int]:
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            request = b""
            while b"\r\n\r\n" not in request:
                request += conn.recv(4096)
            key = next(
                line.split(":", 1)[1].strip()
                for line in request.decode().split("\r\n")
                if line.lower().startswith("sec-websocket-key:")
            )
            accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
            conn.sendall(
                (
                    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                    f"Sec-WebSocket-Accept: {accept}\r\n\r\n"
                ).encode()
            )
            while not stop.wait(0.1):
                try:
                    conn.sendall(b"\x89\x00")  # a ping with no payload, and never a reply
                except OSError:
                    return

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield int(server.getsockname()[1])
    finally:
        stop.set()
        thread.join(timeout=5)
        server.close()


def test_a_kernel_that_never_answers_times_out_at_the_deadline(pinging_server: int) -> None:
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="did not finish"):
        jupyter_client._run_in_kernel(pinging_server, "token", "kernel", "print(1)", time.monotonic() + 2)
    assert 1.5 < time.monotonic() - started < 10
