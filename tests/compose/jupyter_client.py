"""A minimal real Jupyter client: REST calls with a token and code execution over the kernel websocket."""

from __future__ import annotations

import datetime
import json
import time
import urllib.error
import urllib.request
import uuid
from typing import Any

import websocket


def api_status(port: int, path: str = "/api/status", token: str | None = None) -> int:
    """HTTP status of GET path (with `Authorization: token T` when given)."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    if token is not None:
        request.add_header("Authorization", f"token {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def _call(port: int, token: str, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                     headers={"Authorization": f"token {token}",
                                              "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        raw = response.read()
    return json.loads(raw) if raw else None


def execute(port: int, token: str, code: str, timeout: float = 180) -> str:
    """Start a python3 kernel, run `code`, return its stdout; raise on a kernel error or timeout."""
    kernel = _call(port, token, "POST", "/api/kernels", {"name": "python3"})
    try:
        return _run_in_kernel(port, token, kernel["id"], code, timeout)
    finally:
        _call(port, token, "DELETE", f"/api/kernels/{kernel['id']}")


def _run_in_kernel(port: int, token: str, kernel_id: str, code: str, timeout: float) -> str:
    ws = websocket.create_connection(f"ws://127.0.0.1:{port}/api/kernels/{kernel_id}/channels",
                                     header=[f"Authorization: token {token}"], timeout=timeout)
    msg_id = uuid.uuid4().hex
    header = {"msg_id": msg_id, "username": "test", "session": uuid.uuid4().hex, "msg_type": "execute_request",
              "version": "5.3", "date": datetime.datetime.now(datetime.timezone.utc).isoformat()}
    ws.send(json.dumps({"header": header, "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
                        "content": {"code": code, "silent": False, "store_history": False,
                                    "user_expressions": {}, "allow_stdin": False, "stop_on_error": True}}))
    out: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            msg = json.loads(ws.recv())
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream" and content.get("name") == "stdout":
                out.append(content["text"])
            elif kind == "error":
                raise RuntimeError(f"kernel error {content['ename']}: {content['evalue']}")
            elif kind == "status" and content["execution_state"] == "idle":
                return "".join(out)
    finally:
        ws.close()
    raise TimeoutError(f"kernel did not finish within {timeout}s; output so far: {''.join(out)!r}")
