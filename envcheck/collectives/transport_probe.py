"""After the roll call, before the backend: probe the connections the backend will open between nodes.

The first rank of every node listens at the address its backend will take (envcheck.collectives.transport), on a
port the kernel picks as gloo's and NCCL's own listeners do, and publishes it in the store. Then each connects to
the other nodes' listeners the way the backend connects: gloo opens one connection per pair, from the side whose
address is greater (address bytes, then port: gloo/transport/tcp/device.cc, Device::isInitiator; the other side only
listens), and retries a refused connect up to three times (helpers.h, ConnectOperation); NCCL connects both ways
(its bootstrap ring and its socket transport). Over each connection it moves PROBE_BYTES each way and times them.
A connection that fails here is one the backend would fail to open, and one that opens but moves no data one it
would hang on; a slow one is a figure, never a failure.
"""

from __future__ import annotations

import errno
import json
import socket
import struct
import threading
import time
from datetime import timedelta
from typing import Any

PROBE = "envcheck/probe/"
PROBE_BYTES = 1 << 20
ROUNDS = 2
CONNECT_S = 2.0
REFUSED_TRIES = 3
TIMEOUT_TRIES = 2
XFER_S = 3.0
CHUNK = 1 << 16
ALL_PAIRS_UP_TO = 16  # nodes; gloo itself connects every pair, but 1 MiB each way over n² pairs is not free
NEIGHBOURS = 2
ROUND_S = CONNECT_S * TIMEOUT_TRIES * 4 + XFER_S * 2 + 5.0  # the longest a prober waits for the others


def probers(arrivals: dict[int, dict[str, Any]]) -> list[int]:
    """The first rank of every node: one listener and one set of connections per node."""
    first: dict[str, int] = {}
    for rank in sorted(arrivals):
        first.setdefault(str(arrivals[rank]["node"]), rank)
    return sorted(first.values())


def neighbours(rank: int, ranks: list[int]) -> set[int]:
    """The probers this one may connect to: all of them up to ALL_PAIRS_UP_TO nodes; beyond, the nearest
    NEIGHBOURS on each side in rank order (every node's own links are still probed, in O(n) connections)."""
    if len(ranks) <= ALL_PAIRS_UP_TO:
        return set(ranks) - {rank}
    at = ranks.index(rank)
    return {ranks[(at + d) % len(ranks)] for d in range(-NEIGHBOURS, NEIGHBOURS + 1) if d} - {rank}


def _family(address: str) -> int:
    return socket.AF_INET6 if ":" in address else socket.AF_INET


def initiates(mine: tuple[str, int], theirs: tuple[str, int], backend: str) -> bool:
    """Whether this side opens the connection to `theirs` (gloo: the greater address, then port; NCCL: always)."""
    if backend == "nccl":
        return True
    fa, fb = _family(mine[0]), _family(theirs[0])
    if fa != fb:
        return fa > fb
    a, b = socket.inet_pton(fa, mine[0]), socket.inet_pton(fb, theirs[0])
    return (a, mine[1]) > (b, theirs[1])


def _recv_exact(sock: socket.socket, count: int) -> int:
    got = 0
    while got < count:
        chunk = sock.recv(min(CHUNK, count - got))
        if not chunk:
            break
        got += len(chunk)
    return got


class Listener:
    """Serves probes at one address: reads the peer's bytes, acknowledges, sends as many back."""

    def __init__(self, address: str) -> None:
        self.sock = socket.socket(_family(address), socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((address, 0))
        self.sock.listen(64)
        self.port = int(self.sock.getsockname()[1])
        self.thread = threading.Thread(target=self._serve, name="envcheck-probe-listen", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    @staticmethod
    def _answer(conn: socket.socket) -> None:
        with conn:
            try:
                conn.settimeout(XFER_S * 2)
                (count, rounds) = struct.unpack("!QQ", conn.recv(16, socket.MSG_WAITALL))
                count, rounds = min(count, PROBE_BYTES), min(rounds, ROUNDS)
                conn.sendall(b"r")  # ready: the peer times from here, not from this thread's start
                for _ in range(rounds):
                    if _recv_exact(conn, count) != count:
                        return
                    conn.sendall(b"k")
                    conn.sendall(bytes(count))
            except (OSError, struct.error):
                return

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def _why(exc: OSError, timeout_s: float = CONNECT_S) -> str:
    if isinstance(exc, TimeoutError):
        return f"no answer within {timeout_s:g}s"
    if exc.errno == errno.ECONNREFUSED:
        return "connection refused"
    return exc.strerror or str(exc)


def _connect(address: str, port: int) -> tuple[socket.socket | None, str | None, float]:
    refused = timeouts = 0
    began = time.monotonic()
    while True:
        sock = socket.socket(_family(address), socket.SOCK_STREAM)
        sock.settimeout(CONNECT_S)
        try:
            sock.connect((address, port))
            return sock, None, time.monotonic() - began
        except OSError as exc:
            sock.close()
            why = _why(exc)
            refused += exc.errno == errno.ECONNREFUSED
            timeouts += isinstance(exc, TimeoutError)
            if refused >= REFUSED_TRIES or timeouts >= TIMEOUT_TRIES or refused + timeouts == 0:
                return None, why, time.monotonic() - began
            time.sleep(0.2)


def exchange(address: str, port: int) -> dict[str, Any]:
    """Connect to a peer's listener and move PROBE_BYTES each way, ROUNDS times: the outcome and the best times
    (the fastest round: a busy machine's pauses lengthen one round, a slow link every round)."""
    sock, why, took = _connect(address, port)
    if sock is None:
        return {"ok": False, "error": why, "connect_s": round(took, 3)}
    ups, downs = [], []
    payload = bytes(PROBE_BYTES)
    with sock:
        sock.settimeout(XFER_S)
        try:
            sock.sendall(struct.pack("!QQ", PROBE_BYTES, ROUNDS))
            if sock.recv(1) != b"r":
                return {"ok": True, "connect_s": round(took, 4), "transfer_error": "no ready from the peer"}
            for _ in range(ROUNDS):
                began = time.monotonic()
                sock.sendall(payload)
                ack = sock.recv(1)
                ups.append(time.monotonic() - began)
                began = time.monotonic()
                if ack != b"k" or _recv_exact(sock, PROBE_BYTES) != PROBE_BYTES:
                    break
                downs.append(time.monotonic() - began)
        except OSError as exc:
            # a timeout is a link too slow to move 1 MiB in XFER_S or one that drops it: the verdict cannot tell
            stalled = isinstance(exc, TimeoutError)
            return {
                "ok": True,
                "connect_s": round(took, 4),
                "transfer_error": _why(exc, XFER_S),
                "stalled": stalled,
            }
    if not ups or not downs:
        return {"ok": True, "connect_s": round(took, 4), "transfer_error": "the peer stopped answering"}
    return {
        "ok": True,
        "connect_s": round(took, 4),
        "up_s": round(min(ups), 4),
        "down_s": round(min(downs), 4),
        "bytes": PROBE_BYTES,
    }


def run_round(
    store: Any, rank: int, node: str, view: dict[str, Any], ranks: list[int], backend: str
) -> Listener | None:
    """This prober's part: listen, publish, connect where the backend would, publish the outcomes. The caller
    closes the returned listener once rank 0 has spoken (the others may still be connecting to it)."""
    listener = None
    at: dict[str, Any] = {"node": node, "address": view.get("address"), "port": None}
    try:
        listener = Listener(str(view["address"]))
        at["port"] = listener.port
    except (OSError, KeyError, TypeError) as exc:
        at["error"] = f"cannot listen at {view.get('address')}: {exc}"
    store.set(f"{PROBE}at/{rank}", json.dumps(at))
    keys = [f"{PROBE}at/{r}" for r in ranks]
    outcomes: dict[str, Any] = {}
    try:
        store.wait(keys, timedelta(seconds=ROUND_S))
        peers = {r: json.loads(store.get(f"{PROBE}at/{r}")) for r in ranks if r != rank}
    except (RuntimeError, OSError):
        peers = {}
    near = neighbours(rank, ranks)
    for peer, there in peers.items():
        if peer not in near or there["node"] == node or not there.get("port") or at.get("port") is None:
            continue
        if initiates(
            (str(at["address"]), int(at["port"])), (str(there["address"]), int(there["port"])), backend
        ):
            outcomes[str(peer)] = exchange(str(there["address"]), int(there["port"]))
    store.set(f"{PROBE}result/{rank}", json.dumps(outcomes))
    return listener


def gather(store: Any, ranks: list[int]) -> tuple[dict[int, dict[str, Any]], dict[int, dict[str, Any]]]:
    """Rank 0: every prober's listener and outcomes (a prober that never answered is left out)."""
    at: dict[int, dict[str, Any]] = {}
    results: dict[int, dict[str, Any]] = {}
    deadline = time.monotonic() + ROUND_S
    for r in ranks:
        left = max(0.1, deadline - time.monotonic())
        try:
            store.wait([f"{PROBE}result/{r}"], timedelta(seconds=left))
            at[r] = json.loads(store.get(f"{PROBE}at/{r}"))
            results[r] = json.loads(store.get(f"{PROBE}result/{r}"))
        except (RuntimeError, OSError, ValueError):
            continue
    return at, results
