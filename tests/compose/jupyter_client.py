"""A minimal real Jupyter client: REST calls with a token and code execution over the kernel websocket."""

from __future__ import annotations

import contextlib
import datetime
import http.client
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


def answers(port: int) -> bool:
    """Whether the server answers HTTP on `port` now, whatever the status (403 without a token): the engine's published
    port accepts a connection before the server listens in the container, then drops it."""
    try:
        api_status(port)
    except (OSError, http.client.HTTPException):
        return False
    return True


def _call(port: int, token: str, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=data,
        method=method,
        headers={"Authorization": f"token {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        raw = response.read()
    return json.loads(raw) if raw else None


def execute(port: int, token: str, code: str, timeout: float = 180) -> str:
    """Start a python3 kernel, run `code`, return its stdout; raise on a kernel error or at the deadline.

    The deadline holds even while the server keeps the websocket alive: Jupyter Server pings every 30 s,
    and websocket-client's recv() answers pings inside its own loop, so a plain recv() with a 180 s socket
    timeout never returns when the kernel does not answer (a CI run hung here until the job's limit).
    """
    deadline = time.monotonic() + timeout
    kernel = _call(port, token, "POST", "/api/kernels", {"name": "python3"})
    try:
        return _run_in_kernel(port, token, kernel["id"], code, deadline)
    except TimeoutError as exc:  # say what the server thinks of the kernel (starting, busy, dead)
        raise TimeoutError(
            f"{exc}; the server says the kernel is {_kernel_state(port, token, kernel['id'])}"
        ) from None
    finally:
        with contextlib.suppress(OSError):  # a kernel the server already removed: nothing to delete
            _call(port, token, "DELETE", f"/api/kernels/{kernel['id']}")


def _kernel_state(port: int, token: str, kernel_id: str) -> str:
    """The kernel's execution_state as the server reports it, or why it could not be asked."""
    try:
        return repr(_call(port, token, "GET", f"/api/kernels/{kernel_id}").get("execution_state"))
    except OSError as exc:  # urllib's HTTPError (404: the kernel is gone) and URLError are OSErrors
        return f"unknown ({exc})"


def _message(msg_type: str, session: str, content: dict[str, Any]) -> tuple[str, str]:
    msg_id = uuid.uuid4().hex
    header = {
        "msg_id": msg_id,
        "username": "test",
        "session": session,
        "msg_type": msg_type,
        "version": "5.3",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
    }
    return msg_id, json.dumps(
        {
            "header": header,
            "parent_header": {},
            "metadata": {},
            "channel": "shell",
            "buffers": [],
            "content": content,
        }
    )


def _next_message(ws: websocket.WebSocket, deadline: float) -> dict[str, Any] | None:
    """The next JSON message, or None after a ping, a pong or a quiet second; raise at the deadline."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError("deadline passed")
    ws.settimeout(min(remaining, 1.0))
    try:
        opcode, frame = ws.recv_data_frame(True)  # control frames come back too: the deadline is checked
    except websocket.WebSocketTimeoutException:
        return None
    except websocket.WebSocketConnectionClosedException:
        raise RuntimeError("the server dropped the kernel websocket") from None
    if opcode == websocket.ABNF.OPCODE_CLOSE:
        raise RuntimeError("the server closed the kernel websocket")
    if opcode not in (websocket.ABNF.OPCODE_TEXT, websocket.ABNF.OPCODE_BINARY):
        return None
    message: dict[str, Any] = json.loads(frame.data)
    return message


def _run_in_kernel(port: int, token: str, kernel_id: str, code: str, deadline: float) -> str:
    ws = websocket.create_connection(
        f"ws://127.0.0.1:{port}/api/kernels/{kernel_id}/channels",
        header=[f"Authorization: token {token}"],
        timeout=max(1.0, deadline - time.monotonic()),
    )
    session = uuid.uuid4().hex
    out: list[str] = []
    try:
        # Ask until the kernel answers on both channels: a request sent before the kernel's shell and IOPub
        # channels are up can be lost, and so can the IOPub messages (output, idle) that end an execution.
        asked_ids: set[str] = set()
        ready, asked = False, 0.0
        while not ready:
            if time.monotonic() - asked > 5:
                info_id, request = _message("kernel_info_request", session, {})
                ws.send(request)
                asked_ids.add(info_id)
                asked = time.monotonic()
            msg = _next_message(ws, deadline)
            ready = (
                msg is not None
                and msg.get("channel") == "iopub"
                and msg.get("msg_type") == "status"
                and msg.get("parent_header", {}).get("msg_id") in asked_ids
                and msg.get("content", {}).get("execution_state") == "idle"
            )
        msg_id, request = _message(
            "execute_request",
            session,
            {
                "code": code,
                "silent": False,
                "store_history": False,
                "user_expressions": {},
                "allow_stdin": False,
                "stop_on_error": True,
            },
        )
        ws.send(request)
        while True:
            msg = _next_message(ws, deadline)
            if msg is None or msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream" and content.get("name") == "stdout":
                out.append(content["text"])
            elif kind == "error":
                raise RuntimeError(f"kernel error {content['ename']}: {content['evalue']}")
            elif kind == "status" and content["execution_state"] == "idle":
                return "".join(out)
    except TimeoutError:
        raise TimeoutError(
            f"kernel did not finish within the deadline; output so far: {''.join(out)!r}"
        ) from None
    finally:
        ws.close(timeout=1)  # a close frame the server never answers costs one second, not three
