"""capture's second sample and its reader's robustness: each GPU is read again a full window after its own first
reading (not after the first GPU's), the window a finding divides by is that GPU's own, and an unexpected error in
the reader is envcheck's own, never a GPU lost.

What is staged: NVML (tests/staging/pynvml_stub/pynvml.py through tests/staging/nvml.py), with its reads timed and,
where said, slowed (a node whose GPUs take longer to read than the window: eight GPUs under load, each with 18
NVLinks read counter by counter); the PCI bus as a sysfs tree. Everything else is real: capture, its second sample,
the verdict.
"""

from __future__ import annotations

import ctypes
import importlib
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from envcheck.checks.gpu_health.capture import capture
from envcheck.checks.gpu_health.verdict import verdict
from envcheck.core.check import CheckOptions, Context
from envcheck.core.result import Status
from envcheck.probe import nvml_health
from envcheck.probe.nvml_fields import Fields
from tests.checks.gpu_health.gpu_states import CTX
from tests.staging import nvml

# the module (the package exports its `capture` function under the same name)
capture_module = importlib.import_module("envcheck.checks.gpu_health.capture")

WINDOW_S = 0.4  # the second sample's window, shortened for the test
SLOW_S = 0.25  # each GPU's first reading is slowed by this much, after its counters and clock events are read


def _empty_log(tmp_path: Path) -> str:
    (tmp_path / "kmsg").write_text("")
    return str(tmp_path / "kmsg")


def _sysfs(tmp_path: Path, buses: list[str]) -> str:
    root = tmp_path / "pci"
    for bus in buses:
        (root / bus).mkdir(parents=True)
        (root / bus / "vendor").write_text("0x10de\n")
        (root / bus / "class").write_text("0x030200\n")
    return str(root)


def _timed(module: Any, monkeypatch: pytest.MonkeyPatch, name: str, log: dict[str, list[float]]) -> None:
    """Record when `name` is called, per GPU (its PCI address)."""
    real = getattr(module, name)

    def call(h: dict[str, Any], *args: Any) -> Any:
        log.setdefault(str(h.get("bus")), []).append(time.monotonic())
        return real(h, *args)

    monkeypatch.setattr(module, name, call)


def _slowed(module: Any, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    real = getattr(module, name)

    def call(h: dict[str, Any], *args: Any) -> Any:
        time.sleep(SLOW_S)
        return real(h, *args)

    monkeypatch.setattr(module, name, call)


@pytest.fixture
def slow_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., dict[str, list[float]]]:
    """Three GPUs, each with link 0's replay counter at 3 (old errors: sampled again) and a HW slowdown seen in
    its first reading; every GPU's first reading outlasts the window."""

    def install() -> dict[str, list[float]]:
        gpus = [nvml.gpu(i, nvlink_counters={"0": {"replay": 3}}, clock_events=[0x8, 0x1]) for i in range(3)]
        module = nvml.install(monkeypatch, tmp_path / "nvml", nvml.state(*gpus))
        log: dict[str, list[float]] = {}
        _timed(module, monkeypatch, "nvmlDeviceGetCurrentClocksEventReasons", log)
        # read after its NVLinks and clock events: the first reading of each GPU ends late
        _slowed(module, monkeypatch, "nvmlDeviceGetVirtualizationMode")
        monkeypatch.setattr(capture_module, "SLOWDOWN_WINDOW_S", WINDOW_S)
        return log

    return install


def test_every_gpu_is_read_again_a_full_window_after_its_own_first_reading(
    slow_node: Callable[..., dict[str, list[float]]], tmp_path: Path
) -> None:
    """The first GPU's reading starts the clock today: on a node whose GPUs take longer to read than the window,
    the last GPUs are read again within milliseconds, so a PState transient (nvml.h: HW slowdown 'may be also
    reported during PState or clock change') reads as a slowdown that held, and a link's new errors have no time
    to show."""
    log = slow_node()
    data = capture(_empty_log(tmp_path))
    assert len(data["gpus"]) == 3
    for bus, calls in log.items():
        assert len(calls) == 2, bus
        assert calls[1] - calls[0] >= WINDOW_S - 0.01, f"{bus}: read again after {calls[1] - calls[0]:.3f} s"


def test_the_window_a_finding_states_is_the_gpus_own(
    slow_node: Callable[..., dict[str, list[float]]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CRC rate is the growth over the window: a window counted from the first GPU's reading overstates the last
    GPU's, and understates its rate (a link at 100+ CRC errors a second, DCGM's FAIL line, reads as fewer)."""
    counters: dict[str, list[float]] = {}
    log = slow_node()
    _timed(sys.modules["pynvml"], monkeypatch, "nvmlDeviceGetNvLinkErrorCounter", counters)
    data = capture(_empty_log(tmp_path))
    for gpu in data["gpus"]:
        bus = str(gpu["pci"]).lower()[4:]  # 00000000:3B:00.0 -> 0000:3b:00.0
        entry = gpu["nvlink"]["links"][0]
        replay = [t for k, t in enumerate(counters[bus]) if k % 5 == 0]  # counter 0 (replay) of each read
        first_link0, second_link0 = replay[0], replay[18]  # link 0 in the first reading, then in the second
        actual = second_link0 - first_link0
        assert entry["window_s"] <= actual + 0.1, (bus, entry["window_s"], round(actual, 3))
        assert gpu["slowdown"]["window_s"] <= (log[bus][1] - log[bus][0]) + 0.1, bus


def test_an_error_in_the_reader_is_envchecks_own_never_a_gpu_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A field NVML types NVML_VALUE_TYPE_UNSIGNED_SHORT (6) read through nvidia-ml-py 12.550 or older, whose
    c_nvmlValue_t has no usVal member: the reader's AttributeError ended the NVML thread, and the GPUs it had not
    read yet were judged lost (gpu.lost: a healthy node drained for envcheck's own error)."""

    class OldValue(ctypes.Union):  # c_nvmlValue_t of nvidia-ml-py 11.525-12.550 (no usVal)
        _fields_ = [
            ("dVal", ctypes.c_double),
            ("uiVal", ctypes.c_uint),
            ("ulVal", ctypes.c_ulong),
            ("ullVal", ctypes.c_ulonglong),
            ("sllVal", ctypes.c_longlong),
            ("siVal", ctypes.c_int),
        ]

    buses = ["0000:3b:00.0", "0000:3c:00.0"]
    module = nvml.install(monkeypatch, tmp_path / "nvml", nvml.state(nvml.gpu(0), nvml.gpu(1)))
    real = module.nvmlDeviceGetFieldValues

    def old_bindings(h: dict[str, Any], ids: list[Any]) -> list[Any]:
        out = real(h, ids)
        for entry in out:
            value = OldValue()
            value.ullVal = int(entry.value.ullVal)
            entry.value, entry.valueType = value, 6
        return out

    monkeypatch.setattr(module, "nvmlDeviceGetFieldValues", old_bindings)
    data = capture(_empty_log(tmp_path), sysfs=_sysfs(tmp_path, buses))
    result = verdict(data, CTX)
    assert result.code != "gpu.lost", result.summary
    assert len(data["gpus"]) == 2 and data["gpus"][1]["nvlink"]["count"] == 18


def test_any_other_error_in_the_reader_is_said_as_envchecks_and_judges_no_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever else the reader trips on (a binding's odd value, a bug) ends the reading with envcheck's own words;
    the GPUs not read are not lost, and the node path cannot judge rather than drain (an ERROR, not a FAIL)."""
    buses = ["0000:3b:00.0", "0000:3c:00.0"]
    nvml.install(monkeypatch, tmp_path / "nvml", nvml.state(nvml.gpu(0), nvml.gpu(1)))
    real = nvml_health.inforom

    def trips(fields: Fields, h: Any) -> Any:
        if h.get("minor") == 1:
            raise TypeError("an unexpected value")
        return real(fields, h)

    monkeypatch.setattr(nvml_health, "inforom", trips)
    data = capture(_empty_log(tmp_path), sysfs=_sysfs(tmp_path, buses))
    assert "envcheck could not read NVML" in str(data["nvml_error"]) and "GPU 1" in str(data["nvml_error"])
    result = verdict(data, Context(options=CheckOptions(cluster_mode="prolog")))
    assert result.status is Status.ERROR and result.code != "gpu.lost", result.summary


class PciInfo(ctypes.Structure):
    """nvmlPciInfo_t as nvml.h and nvidia-ml-py declare it."""

    _fields_ = [
        ("busIdLegacy", ctypes.c_char * 16),
        ("domain", ctypes.c_uint),
        ("bus", ctypes.c_uint),
        ("device", ctypes.c_uint),
        ("pciDeviceId", ctypes.c_uint),
        ("pciSubSystemId", ctypes.c_uint),
        ("busId", ctypes.c_char * 32),
    ]


def test_the_drain_query_names_the_gpu_by_domain_bus_and_device() -> None:
    """nvmlDeviceQueryDrainState takes an nvmlPciInfo_t; its numeric domain, bus and device are the address NVML
    documents (NVIDIA/k8s-test-infra's NVML mock, pkg/gpu/mocknvml/engine: "The numeric fields are what NVML
    documents, but a caller may fill only the busId string"). Filled with the string alone, a driver that reads
    the numbers is asked about 0000:00:00 and answers an error: the drained GPU is then judged lost."""
    asked: list[tuple[int, int, int]] = []

    class Bindings:
        nvmlPciInfo_t = PciInfo

        @staticmethod
        def nvmlDeviceQueryDrainState(info: PciInfo) -> int:
            asked.append((info.domain, info.bus, info.device))
            if (info.domain, info.bus, info.device) != (0, 0x3C, 0):
                raise ValueError("NVML_ERROR_INVALID_ARGUMENT (no GPU at that address)")
            return 1

    assert nvml_health.drained(Fields(Bindings()), "0000:3c:00.0") is True, asked


def test_a_counter_no_rule_judges_never_makes_a_healthy_node_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NVLink's data ECC counter (nvmlNvLinkErrorCounter_t DL_ECC_DATA) is read but judged by no rule (DCGM's
    NVLink4 watch judges replay, recovery and CRC; fabric_findings the same): a count in it alone is no reason to
    read the GPU again, and a healthy node is read once, without the window's wait."""
    monkeypatch.setattr(capture_module, "SLOWDOWN_WINDOW_S", 5.0)  # a wait would show
    nvml.install(
        monkeypatch, tmp_path / "nvml", nvml.state(nvml.gpu(0, nvlink_counters={"2": {"ecc_data": 41}}))
    )
    began = time.monotonic()
    data = capture(_empty_log(tmp_path))
    took = time.monotonic() - began
    entry = data["gpus"][0]["nvlink"]["links"][2]
    assert entry["ecc_data"] == 41 and "again" not in entry
    assert took < 5.0, f"capture waited: {took:.1f} s"
    assert verdict(data, CTX).status is Status.PASS
