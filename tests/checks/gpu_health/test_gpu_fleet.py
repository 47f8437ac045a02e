"""Fleet evidence: hangs as evidence, the whole Xid catalogue, a windowed kernel log, fallen-off-the-bus
lines, PCI sysfs against NVML, repeating application Xids.

Simulated, and only that: NVML (no driver can exist here: a pynvml module whose call blocks) and a driver call
stuck in the kernel (a stand-in child built from C that vfork()s, so the kernel really holds it in D state, as
it holds a process stuck in the NVIDIA driver), and a PCI sysfs tree with NVIDIA functions (this host has none).
The kernel-log lines are real ones, cited.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from envcheck.checks.gpu_health.bundle_shape import validate
from envcheck.checks.gpu_health.kernel_events import scan
from envcheck.checks.gpu_health.verdict import verdict
from envcheck.checks.gpu_health.xid import meaning_of
from envcheck.checks.gpu_health.xid_catalog import CATALOG, UNUSED
from envcheck.core.check import Context
from envcheck.core.result import Status
from envcheck.probe.gpu_usage import nvml_gpus
from envcheck.probe.hang import run_in_child
from envcheck.probe.kernel_log import read_cursor, write_cursor
from envcheck.probe.pci import pci_gpus
from tests.staging import nvml

# NVIDIA/NVSentinel#155 (a newer driver: no Xid line for it)
FELL = (
    "NVRM: The NVIDIA GPU 0000:b3:00.0 (PCI ID: 10de:26b5) installed in this system has fallen off the bus "
    "and is not responding to commands."
)
# https://github.com/leptonai/gpud/pull/46 (dmesg --ctime): one Xid 13 fault logs three lines in one second
XID13 = (
    "[Fri Aug 30 11:43:09 2024] NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, Graphics SM "
    "Warp Exception on (GPC 7, TPC 7, SM 0): Illegal Instruction Parameter"
)
# https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1151
XID79 = "NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus."
# The driver's load banner: a real dmesg line (driver 580.142 on Fedora 42) from a public repository's notes found
# in the stored code corpus (the corpus gave no URL for it; the same banner appears in many public dmesg logs).
LOAD = "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  580.142  Tue Mar  3 20:04:04 UTC 2026"
# Not cited: the per-GPU line NVRM prints when it initialises a GPU (at load and after a reset), format only.


def gpu(index: int, pci: str) -> dict[str, object]:
    return {"index": index, "name": "NVIDIA H100 80GB HBM3", "pci": pci, "persistence": True}


def data(
    *gpus: dict[str, object],
    bus: list[dict[str, object]] | None = None,
    pci: object = None,
    xid: list[dict[str, object]] | None = None,
) -> dict[str, object]:
    return {
        "nvml_error": None,
        "driver_version": "580.95.05",
        "gpus": list(gpus),
        "nvml_hung": None,
        "nvml_hang": None,
        "pci_gpus": pci if pci is not None else [],
        "kernel_log": {"source": "/dev/kmsg", "error": None, "xid": xid or [], "bus": bus or []},
    }


def judge(d: dict[str, object]):  # type: ignore[no-untyped-def]
    validate(d, "gpu_health")
    return verdict(d, Context())


def test_the_catalogue_covers_every_xid_nvidia_lists() -> None:
    assert set(CATALOG) | set(UNUSED) == set(range(1, 173))
    assert "GPU stopped processing" in meaning_of(46).meaning and meaning_of(46).rank == 1  # was 'unknown'
    assert meaning_of(79).rank == 0 and meaning_of(13).rank is None and meaning_of(43).rank is None


def test_a_gpu_that_fell_off_the_bus_without_an_xid_fails_the_node() -> None:
    found = scan([FELL, "NVRM: The NVIDIA probe routine failed for 1 device(s)."])
    result = judge(data(gpu(0, "00000000:1B:00.0"), bus=found["bus"]))
    assert result.status is Status.FAIL and result.code == "gpu.fell_off_bus" and result.fault_class == "node"
    assert result.summary.startswith("PCI 0000:b3:00.0: fell off the bus (NVML no longer lists it)")


def test_a_gpu_on_the_pci_bus_that_nvml_does_not_list_is_lost(tmp_path: Path) -> None:
    for addr, vendor, cls in (
        ("0000:1b:00.0", "0x10de", "0x030200"),
        ("0000:b3:00.0", "0x10de", "0x030200"),
        ("0000:b3:00.1", "0x10de", "0x040300"),
        ("0000:05:00.0", "0x15b3", "0x020700"),
    ):
        (tmp_path / addr).mkdir()
        (tmp_path / addr / "vendor").write_text(vendor + "\n")
        (tmp_path / addr / "class").write_text(cls + "\n")
    found = pci_gpus(str(tmp_path))
    assert found == ["0000:1b:00.0", "0000:b3:00.0"]  # not the audio function, not the NIC
    result = judge(data(gpu(0, "00000000:1B:00.0"), pci=found))
    assert result.status is Status.FAIL and result.code == "gpu.lost"
    assert result.summary.startswith("PCI 0000:b3:00.0: on the PCI bus but not listed by NVML (1 of 2 GPUs)")
    assert (
        judge(data(gpu(0, "00000000:1B:00.0"), gpu(1, "00000000:B3:00.0"), pci=found)).status is Status.PASS
    )


def test_this_hosts_sysfs_lists_no_nvidia_gpu() -> None:
    assert pci_gpus() == []


def kmsg(seq: int, usec: int, text: str) -> str:
    return f"4,{seq},{usec},-;{text}"


def test_the_window_counts_from_the_driver_load_the_gpu_reset_and_the_cursor() -> None:
    old = kmsg(10, 1_000_000, XID79)
    assert scan([old])["xid"][0]["xid"] == 79
    assert scan([old, kmsg(11, 2_000_000, LOAD)])["xid"] == []  # the driver reloaded since
    assert (
        scan([old, kmsg(11, 2_000_000, NVLINK_START), kmsg(12, 2_100_000, LOAD)])["xid"] == []
    )  # with its start
    assert scan([old, kmsg(11, 2_000_000, "NVRM: GPU at PCI:0000:2b:00: GPU-5a1c0b52")])["xid"] == []  # reset
    assert scan([old], after_seq=10)["xid"] == []  # the last run saw it
    assert scan([old], since_s=1.5)["xid"] == []  # outside the window
    assert scan([old, kmsg(12, 3_000_000, XID79)], after_seq=10)["xid"][0]["count"] == 1  # a new one counts


# The first line of every load of the driver module (its NVLink core starting), then a probe-time NVRM line and the
# banner, as a public dmesg log in the stored code corpus shows them in this order (open module 615.71.09):
# "nvidia-nvlink: Nvlink Core is being initialized, major device number 237" / "NVRM: Failed to read PCI extended
# capability header ..." / "NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  615.71.09 ...".
NVLINK_START = "nvidia-nvlink: Nvlink Core is being initialized, major device number 237"
# kernel-open/nvidia/nv.c (nvidia_init_module), printed after the PCI probe and before the banner.
PROBE_FAILED = "NVRM: The NVIDIA probe routine failed for 1 device(s)."


def test_a_gpu_lost_at_probe_before_the_banner_belongs_to_this_load() -> None:
    """The probe's failures precede the banner of the same load; a window that starts at the banner
    passed a node that came up with 7 of its 8 GPUs. An earlier load's Xid stays outside the window."""
    earlier = kmsg(10, 1_000_000, XID79)  # the previous driver instance's GPU at 2b
    load = [
        kmsg(11, 2_000_000, NVLINK_START),
        kmsg(12, 2_100_000, FELL),
        kmsg(13, 2_200_000, PROBE_FAILED),
        kmsg(14, 2_300_000, LOAD),
    ]
    found = scan([earlier, *load])
    assert found["xid"] == [] and [b["pci"] for b in found["bus"]] == ["0000:b3:00"]
    result = judge(data(gpu(0, "00000000:1B:00.0"), bus=found["bus"]))
    assert result.status is Status.FAIL and result.code == "gpu.fell_off_bus"
    assert [b["pci"] for b in scan(load)["bus"]] == ["0000:b3:00"]  # a boot's first load
    # No start line (a ring buffer that lost it, a grepped log): the probe's lines before the banner are still this
    # load's (the banner is printed after every GPU was probed), and the earlier instance's Xid is still gone.
    assert [b["pci"] for b in scan(load[1:])["bus"]] == ["0000:b3:00"]
    assert scan([earlier, *load[1:]])["xid"] == []


def test_the_cursor_is_saved_atomically_and_only_trusted_for_this_boot(tmp_path: Path) -> None:
    state = tmp_path / "xid.json"
    assert write_cursor(str(state), 42, boot="boot-a") is None
    assert read_cursor(str(state), boot="boot-a") == 42 and read_cursor(str(state), boot="boot-b") is None
    assert [p.name for p in tmp_path.iterdir()] == ["xid.json"]  # no temp file left
    assert write_cursor(str(tmp_path / "missing" / "x.json"), 1).startswith("kernel log cursor not saved")


def test_an_application_xid_repeating_on_one_gpu_escalates_inside_the_operators_window() -> None:
    burst = [XID13.replace("11:43:09", f"11:4{n}:09") for n in range(3)]
    once = judge(windowed(data(gpu(0, "00000000:CB:00.0"), xid=scan([XID13] * 3)["xid"])))
    assert once.status is Status.PASS  # one fault's three lines: the application's
    repeated = judge(windowed(data(gpu(0, "00000000:CB:00.0"), xid=scan(burst)["xid"])))
    assert repeated.status is Status.WARN and repeated.code == "xid.13.repeated"
    assert "repeating on this GPU (3 bursts)" in repeated.summary and "dcgmi diag -r 3" in (
        repeated.remediation or ""
    )


def test_application_xids_since_boot_never_escalate_without_a_window() -> None:
    """On a shared node three jobs of three users each hitting Xid 13 since boot are three applications'
    bugs, not a GPU's: without ENVCHECK_XID_WINDOW_S set by the operator, no count escalates."""
    burst = [XID13.replace("11:43:09", f"11:4{n}:09") for n in range(9)]
    result = judge(data(gpu(0, "00000000:CB:00.0"), xid=scan(burst)["xid"]))
    assert result.status is Status.PASS and "Xid 13 9x (application errors, not the node)" in result.summary


def windowed(d: dict[str, object]) -> dict[str, object]:
    """The kernel log as read with ENVCHECK_XID_WINDOW_S set (records since 3600 s before now)."""
    d["kernel_log"]["window"] = {"after_seq": None, "since_s": 3600.0}  # type: ignore[index]
    return d


def test_a_hung_nvml_init_is_named_within_its_budget(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Simulated NVML (the one NVML fake): nvmlInit blocks (as on a wedged driver)."""
    nvml.install(monkeypatch, tmp_path, nvml.state(nvml.gpu(0), init_hang="S", init_hang_s=2))
    began = time.monotonic()
    said = nvml_gpus(budget_s=0.3)
    assert time.monotonic() - began < 2 and said.startswith("NVML did not answer within 0.3 s")


VFORK_C = r"""
#include <unistd.h>
int main(void) { if (vfork() == 0) { sleep(30); _exit(0); } return 0; }
"""


@pytest.fixture
def stuck_binary(tmp_path: Path) -> Path:
    if not shutil.which("cc"):
        pytest.skip("no C compiler for the stand-in stuck driver call")
    (tmp_path / "stuck.c").write_text(VFORK_C)
    subprocess.run(["cc", "-o", str(tmp_path / "stuck"), str(tmp_path / "stuck.c")], check=True, timeout=60)
    return tmp_path / "stuck"


def test_a_child_stuck_in_d_state_is_named_with_its_wchan(stuck_binary: Path) -> None:
    got = run_in_child([str(stuck_binary)], 0.5, "cuInit")
    assert got.hang is not None and got.hang["call"] == "cuInit" and got.hang["budget_s"] == 0.5
    assert got.hang["state"] == "D" and got.hang.get("wchan")  # the kernel's own view
    assert not got.hang.get("left_running")  # a killable D (vfork) is killed


def test_a_child_that_cannot_be_killed_is_reported_and_left(stuck_binary: Path) -> None:
    """An unkillable child is simulated by a kill that has no effect (the kernel holding it); nothing waits."""
    began = time.monotonic()
    got = run_in_child([str(stuck_binary)], 0.3, "cuInit", kill=lambda pid: None)
    assert time.monotonic() - began < 1.5
    assert got.hang is not None and got.hang["left_running"] is True
    os.killpg(got.hang["pid"], signal.SIGKILL)  # the test cleans up what it staged
