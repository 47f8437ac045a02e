"""Node profiles: built-in data with a source per value, bad files as one line (exit 2), and a
node that differs from its profile named by a stable code.

Simulated, and only that: NVML (the one NVML fake, tests/staging/nvml.py, answering as an 8-GPU node would; no
driver can exist here) and the PCI sysfs tree (this host has no NVIDIA function). Real: the TOML parser, the CLI's
argument handling, and the PCI reader walking the staged tree.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from envcheck.checks.node.profile_match import capture, verdict
from envcheck.cluster.node_profiles import BUILT_IN, built_in, load
from envcheck.core.check import Context, ProfileOptions
from envcheck.core.result import Status
from tests.helpers import request_of
from tests.staging import nvml

ROOT = Path(__file__).resolve().parents[2]
BUSES = ["18", "2a", "3a", "5d", "9a", "ab", "b3", "db"]


def test_every_built_in_profile_loads_and_cites_a_source_for_each_value() -> None:
    from envcheck.cluster.node_profiles import tomllib

    assert set(built_in()) >= {"h100-sxm-8", "h200-8", "a100-sxm-8", "a100-80gb-sxm-8", "l40s", "b200-8"}
    for name in built_in():
        p = load(name)
        raw = tomllib.loads((BUILT_IN / f"{name}.toml").read_text())
        values = {f.name for f in dataclasses.fields(ProfileOptions)} - {"profile", "description", "level"}
        assert set(raw["sources"]) >= {k for k in values if getattr(p, k) is not None}, name


@pytest.mark.parametrize(
    "text, needle",
    [
        ("gpu_count = 'eight'\n", "gpu_count = 'eight' must be a whole number from 1 to 64"),
        ("gpu_count = 8\ngpu_modle = 'H100'\n", "unknown field 'gpu_modle'"),
        ("gpu_count = 8\ndriver_floor = 535\n", "driver_floor = 535 must be a driver version"),
        ("gpu_count = 8\nlevel = 'deep'\n", "level = 'deep' must be one of node, torch"),
        ("gpu_count = [8\n", "not valid TOML"),
        ("level = 'node'\n", "expects nothing; set at least gpu_model or gpu_count"),
    ],
)
def test_a_bad_profile_is_one_line_naming_the_field_and_exit_2(
    tmp_path: Path, text: str, needle: str
) -> None:
    path = tmp_path / "node.toml"
    path.write_text(text)
    done = subprocess.run(
        [sys.executable, "-m", "envcheck", "run", "--for", "prolog", "--profile", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and needle in done.stderr, done.stderr


def test_a_fifo_or_an_unknown_name_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "profile.toml"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="not a regular file"):
        load(str(fifo))
    with pytest.raises(ValueError, match="no built-in profile 'h100' .*built-in: a100-80gb-sxm-8"):
        load("h100")


def nvml_node(
    gpus: int = 8,
    name: str = "NVIDIA H100 80GB HBM3",
    driver: str = "580.95.05",
    width: dict[int, int] | None = None,
    links_down: dict[int, list[int]] | None = None,
    skip_bus: str | None = None,
) -> dict[str, Any]:
    """The one NVML fake's state of an 8-GPU HGX node (values as nvidia-smi shows them on one)."""
    buses = [b for b in BUSES if b != skip_bus][:gpus]
    return nvml.state(
        *(
            nvml.gpu(
                i,
                bus=f"0000:{bus}:00.0",
                name=name,
                pcie_gen_max=5,
                pcie_width=(width or {}).get(i, 16),
                nvlinks=[0 if link in (links_down or {}).get(i, []) else 1 for link in range(18)],
            )
            for i, bus in enumerate(buses)
        ),
        driver=driver,
    )


def sysfs(tmp_path: Path) -> Path:
    """A PCI tree with the 8 GPUs of an HGX H100 board (10de:2330, 3D controller) and an NVSwitch bridge."""
    root = tmp_path / "devices"
    for bus in BUSES:
        d = root / f"0000:{bus}:00.0"
        d.mkdir(parents=True)
        (d / "vendor").write_text("0x10de\n")
        (d / "class").write_text("0x030200\n")
    switch = root / "0000:05:00.0"
    switch.mkdir()
    (switch / "vendor").write_text("0x10de\n")
    (switch / "class").write_text("0x068000\n")
    return root


def judge(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, **node: Any) -> Any:
    nvml.install(monkeypatch, tmp_path / "nvml", nvml_node(**node))
    return verdict(capture(5, str(sysfs(tmp_path))), load("h100-sxm-8"))


def test_a_node_that_matches_its_profile_passes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    got = judge(monkeypatch, tmp_path)
    assert got.status is Status.PASS and got.summary == "matches profile h100-sxm-8 (8x H100 SXM): 8 GPU(s)"


def test_a_missing_gpu_is_named_by_the_pci_address_the_bus_still_shows(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    got = judge(monkeypatch, tmp_path, gpus=7, skip_bus="b3")
    assert got.status is Status.FAIL and got.code == "profile.gpu_count" and got.fault_class.value == "node"
    assert got.summary == "8x H100 SXM expected, 7 found: 0000:b3:00.0 missing"
    assert "lspci -s 0000:b3:00.0" in (got.remediation or "")


@pytest.mark.parametrize(
    "node, code, summary",
    [
        (
            {"name": "NVIDIA H100 PCIe"},
            "profile.gpu_model",
            "GPU 0 is 'NVIDIA H100 PCIe', the profile expects 'H100 80GB HBM3' (+7 more)",
        ),
        (
            {"driver": "470.82.01"},
            "profile.driver_floor",
            "driver 470.82.01 is older than the profile's floor 525.60.13",
        ),
        (
            {"width": {5: 8}},
            "profile.pcie_link",
            "GPU 5 (00000000:AB:00.0): PCIe link gen 5 x8, the profile expects gen 5 x16",
        ),
        (
            {"links_down": {2: [4, 11]}},
            "profile.nvlink_down",
            "GPU 2 (00000000:3A:00.0): 16 of 18 NVLinks up (down: 4, 11)",
        ),
    ],
)
def test_each_mismatch_has_its_own_code(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, node: dict[str, Any], code: str, summary: str
) -> None:
    got = judge(monkeypatch, tmp_path, **node)
    assert got.status is Status.FAIL and got.code == code and got.summary == summary
    assert got.measured["codes"] == [code]


def _context(*argv: str) -> Context:
    """The run context `envcheck run ARGV` derives from its request and mode."""
    from envcheck.app.cluster_mode import Mode
    from envcheck.app.run_command import run_context

    request = request_of("run", *argv)
    return run_context(request, Mode.of(request))


def test_flags_override_the_profile(tmp_path: Path) -> None:
    ctx = _context("--for", "prolog", "--profile", "h100-sxm-8", "--min-busbw", "300")
    assert ctx.expect_gpus == 8 and ctx.options.dist.min_busbw_gbps == 300.0 and ctx.options.node_path
    # The profile's absolute busbw floor is opt-in (Azure's 431 GB/s was measured at a 16 GiB message, the
    # sweep stops at 1 GiB, so applied by default it warned on healthy nodes): without --profile-floors, no floor.
    ctx = _context("--profile", "h200-8", "--expect-gpus", "4")
    assert ctx.expect_gpus == 4 and ctx.options.dist.min_busbw_gbps is None and not ctx.options.node_path
    assert _context("--profile", "h200-8", "--profile-floors").options.dist.min_busbw_gbps == 431.0


def test_a_profile_floor_is_opt_in_and_states_its_message_size(tmp_path: Path) -> None:
    from envcheck.app.run_command import floors_note

    note = floors_note(request_of("run", "--profile", "h100-sxm-8", "--profile-floors"))
    assert note == (
        "--profile-floors: profile h100-sxm-8's busbw floor 460 GB/s was measured at a 16 GiB all-reduce "
        "message; dist.busbw judges it only at that size"
    )
    assert floors_note(request_of("run", "--profile", "h100-sxm-8")) is None
    for name in built_in():  # every built-in floor states its size
        profile = load(name)
        assert (profile.busbw_floor_gbps is None) == (profile.busbw_floor_bytes is None), name
    site = tmp_path / "site.toml"
    site.write_text("gpu_count = 8\nbusbw_floor_gbps = 400.0\n")
    unsized = floors_note(request_of("run", "--profile", str(site), "--profile-floors"))
    assert unsized == (
        "--profile-floors: profile site's busbw floor 400 GB/s states no message size; dist.busbw "
        "compares it with its sweep's peak"
    )


def test_a_mig_gpus_links_are_not_held_to_the_profile(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """NVML reports a MIG-enabled GPU's NVLinks as down (DCGM 4.5.0, DcgmHealthWatch.cpp MonitorNVLinkStatus:
    "Bug 200682374 - NVML reports links to MIG enabled GPUs as down"): gpu.health does not judge them, and the
    profile, which only adds expectations, must not drain the node for them either. Its twin, the same links down
    without MIG, is test_each_mismatch_has_its_own_code's profile.nvlink_down."""
    state = nvml_node(links_down={2: list(range(18))})
    state["gpus"][2]["mig"] = True
    nvml.install(monkeypatch, tmp_path / "nvml", state)
    got = verdict(capture(5, str(sysfs(tmp_path))), load("h100-sxm-8"))
    assert got.status is Status.PASS, got.summary
