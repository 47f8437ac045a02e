"""The direct sources beside their proxies: the kernel's own module list, and a daemon alive by its process or a
socket that accepts, never by a socket file alone.

Real here: processes (a copy of `sleep` run under a daemon's executable name), UNIX sockets (listening, and one a
closed listener left behind), /proc. Staged: a /sys/module tree and a /proc/modules text in the kernel's own formats
(Documentation/ABI/testing/sysfs-module: initstate "live", "coming", "going"; kernel/module/procfs.c m_show: "name size
refcount users, state address (taints)"); this machine's kernel has no NVIDIA module.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from envcheck.probe import daemons
from envcheck.probe.modules import loaded_modules, module_loaded, nvidia_modules

# The shape of a driver host's list, as the kernel writes it (the nvidia line's users end with a comma; "(POE)" is
# the taint of a proprietary, out-of-tree, unsigned module); the sizes are a 580 driver's.
PROC_MODULES = (
    "nvidia_uvm 1806336 0 - Live 0x0000000000000000 (POE)\n"
    "nvidia_drm 122880 4 - Live 0x0000000000000000 (POE)\n"
    "nvidia_modeset 1642496 5 nvidia_drm, Live 0x0000000000000000 (POE)\n"
    "nvidia 62066688 106 nvidia_uvm,nvidia_modeset, Live 0x0000000000000000 (POE)\n"
    "xfs 2109440 2 - Live 0x0000000000000000\n"
)


def test_sysfs_names_the_loaded_nvidia_modules_and_their_state(tmp_path: Path) -> None:
    for name, state in (("nvidia", "live"), ("nvidia_uvm", "going"), ("nvidia_modeset", "coming")):
        (tmp_path / "module" / name).mkdir(parents=True)
        (tmp_path / "module" / name / "initstate").write_text(f"{state}\n")
    (
        tmp_path / "module" / "nvidia_drm"
    ).mkdir()  # a directory without initstate: built in, or not a module's own
    got = nvidia_modules(str(tmp_path / "module"), str(tmp_path / "none"))
    assert got == {"nvidia": "Live", "nvidia_uvm": "Unloading", "nvidia_modeset": "Loading"}
    assert module_loaded(got, "nvidia") is True and module_loaded(got, "nvidia_uvm") is False


def test_proc_modules_where_sysfs_is_not_mounted(tmp_path: Path) -> None:
    path = tmp_path / "modules"
    path.write_text(PROC_MODULES.replace("nvidia_uvm 1806336 0 - Live", "nvidia_uvm 1806336 0 - Unloading"))
    got = nvidia_modules(str(tmp_path / "no-sysfs"), str(path))
    assert got == {
        "nvidia_uvm": "Unloading",
        "nvidia_drm": "Live",
        "nvidia_modeset": "Live",
        "nvidia": "Live",
    }
    assert module_loaded(got, "nvidia") is True and module_loaded(got, "nvidia_uvm") is False
    assert loaded_modules(str(path))["xfs"] == "Live"


def test_no_module_and_an_unreadable_list_are_told_apart(tmp_path: Path) -> None:
    path = tmp_path / "modules"
    path.write_text("xfs 2109440 2 - Live 0x0000000000000000\n")
    assert (
        nvidia_modules(str(tmp_path / "no-sysfs"), str(path)) == {} and module_loaded({}, "nvidia") is False
    )
    gone = nvidia_modules(str(tmp_path / "no-sysfs"), str(tmp_path / "none"))
    assert isinstance(gone, str) and "can be read" in gone
    assert module_loaded(gone, "nvidia") is None  # unknown, never "not loaded"


@pytest.fixture
def fabric_manager(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A real process whose executable is named nv-fabricmanager (a copy of sleep): a live daemon by its process."""
    exe = tmp_path / "nv-fabricmanager"
    shutil.copy(shutil.which("sleep") or "/bin/sleep", exe)
    proc = subprocess.Popen([str(exe), "60"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_a_daemon_is_alive_when_its_process_is(fabric_manager: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 5  # until the child has exec'd: its argv[0] names it from then on
    while fabric_manager.pid not in daemons.processes(("nv-fabricmanager",)) and time.monotonic() < deadline:
        time.sleep(0.05)
    state = daemons.daemon_state(daemons.FABRIC_MANAGER)
    assert fabric_manager.pid in state["pids"] and state["alive"] is True


def test_no_process_where_the_hosts_are_visible_is_not_running() -> None:
    if not daemons.host_pid_namespace():
        pytest.skip("this machine's PID namespace is not the host's: a missing process proves nothing here")
    state = daemons.daemon_state(daemons.IMEX)
    assert state == {"pids": [], "sockets": {}, "alive": False}


def _listener(path: Path) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    s.listen(1)
    return s


def test_a_socket_file_is_alive_only_while_something_accepts_on_it(tmp_path: Path) -> None:
    path = tmp_path / "socket"
    assert daemons.socket_state(str(path)) == "absent"
    listener = _listener(path)
    try:
        assert daemons.socket_state(str(path)) == "accepts"
    finally:
        listener.close()
    assert path.exists() and daemons.socket_state(str(path)) == "refused"  # a dead daemon's file


def test_a_dead_daemons_socket_file_is_not_a_live_daemon(tmp_path: Path) -> None:
    """nvidia-persistenced killed without cleanup leaves /run/nvidia-persistenced/socket: connect(2) is refused."""
    path = tmp_path / "socket"
    _listener(path).close()
    dead = daemons.Daemon("nvidia-persistenced", ("nvidia-persistenced-not-here",), (str(path),))
    state = daemons.daemon_state(dead)
    assert state["sockets"] == {str(path): "refused"} and state["alive"] is False
    listener = _listener(tmp_path / "live")
    try:
        live = daemons.Daemon(
            "nvidia-persistenced", ("nvidia-persistenced-not-here",), (str(tmp_path / "live"),)
        )
        assert daemons.daemon_state(live)["alive"] is True  # a container given the socket, not the process
    finally:
        listener.close()


def test_in_a_private_pid_namespace_an_absent_process_is_unknown(tmp_path: Path) -> None:
    """In a container (its own PID namespace) the host's daemons are invisible: neither alive nor dead."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare for a private PID namespace")
    code = (
        "from envcheck.probe import daemons; s = daemons.daemon_state(daemons.HOSTENGINE); "
        "print(s['alive'], s['pids'])"
    )
    done = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", "python3", "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        check=False,
    )
    if done.returncode != 0 and "unshare" in done.stderr:
        pytest.skip(f"unshare --pid refused here: {done.stderr.strip()[:120]}")
    assert done.stdout.split() == ["None", "None"], done.stderr


def test_processes_finds_a_daemon_by_its_full_name_not_the_cut_comm(tmp_path: Path) -> None:
    """/proc/<pid>/comm keeps 15 characters ('nvidia-persiste'); argv[0] names it whole."""
    exe = tmp_path / "nvidia-persistenced"
    shutil.copy(shutil.which("sleep") or "/bin/sleep", exe)
    proc = subprocess.Popen([str(exe), "60"])
    try:
        deadline = time.monotonic() + 5
        while not daemons.processes(("nvidia-persistenced",)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.pid in daemons.processes(("nvidia-persistenced",))
        assert Path(f"/proc/{proc.pid}/comm").read_text().strip() == "nvidia-persiste"
    finally:
        proc.kill()
        proc.wait()
