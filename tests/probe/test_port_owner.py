"""Who holds a TCP port: /proc/net/tcp and tcp6 as the kernel writes them, and a real listener found with its pid.

The records: the kernel's own example (Documentation/networking/proc_net_tcp.rst: `46: 010310AC:9C4C 030310AC:1770
01 ...`, an ESTABLISHED socket of 172.16.3.1) and lines copied from this machine's tables (a LISTEN socket on
0.0.0.0:2024, a TIME_WAIT one on 127.0.0.1, an IPv6 v4-mapped one)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from envcheck.probe import port_owner

HEADER = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
KERNEL_DOC = (
    "   46: 010310AC:9C4C 030310AC:1770 01 00000150:00000000 01:00000019 00000000  1000        0 54165785 4 "
    "cd1e6040 25 4 27 3 -1\n"
)
LISTEN = (
    "   0: 00000000:07E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1065 1 "
    "000000002b128c41 100 0 0 10 0\n"
)
TIME_WAIT = "   1: 0100007F:912E 0100007F:B685 06 00000000:00000000 03:0000012D 00000000     0        0 0 3 00000000aa996b08\n"
MAPPED = (
    "   0: 0000000000000000FFFF00000100007F:07E8 0000000000000000FFFF00000100007F:AA6D 0A 00000000:00000000 "
    "00:00000000 00000000  1000        0 4242 1 000000009ac4fc38 100 0 0 10 0\n"
)


def test_the_kernels_records_are_read_as_listeners_or_not(tmp_path: Path) -> None:
    v4, v6 = tmp_path / "tcp", tmp_path / "tcp6"
    v4.write_text(HEADER + KERNEL_DOC + LISTEN + TIME_WAIT)
    v6.write_text(HEADER + MAPPED)
    assert port_owner.listening(0x07E8, (str(v4), str(v6))) == [
        ("0.0.0.0", 0, 1065),
        ("::ffff:127.0.0.1", 1000, 4242),
    ]
    assert (
        port_owner.listening(0x9C4C, (str(v4),)) == []
    )  # the kernel's example is ESTABLISHED, not a listener
    assert port_owner.listening(0x912E, (str(v4),)) == []  # TIME_WAIT holds no port against a new listener


def test_a_real_listener_is_found_with_its_pid_and_command() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        found = port_owner.holders(port)
    assert [(h.address, h.uid, h.pid) for h in found] == [("127.0.0.1", os.getuid(), os.getpid())], found
    assert found[0].command and "python" in found[0].command
    assert port_owner.describe(found).startswith(f"pid {os.getpid()} (")


def test_a_socket_whose_process_cannot_be_seen_is_still_named_by_its_owner() -> None:
    unseen = port_owner.Holder(address="0.0.0.0", uid=1000, inode=1)
    assert port_owner.describe([unseen]) == (
        "a socket of uid 1000 listening on 0.0.0.0 (its process is not visible to this user: another user's, or "
        "outside this container)"
    )
