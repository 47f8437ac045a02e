"""The peak table: name matching as CUDA/NVML report names, and no guess for unknown GPUs."""

from __future__ import annotations

from pathlib import Path

import pytest

from envcheck.perf.memory import pcie_link
from envcheck.perf.peaks import lookup, pcie_peak_gbps, pct_of_peak
from envcheck.probe.nvml import read_nvml
from envcheck.probe.nvml_fields import Fields
from tests.staging import nvml


@pytest.mark.parametrize(
    ("name", "model"),
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA H200", "H200 SXM"),
        ("NVIDIA H200 NVL", "H200 NVL"),
        ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM"),
        ("NVIDIA A100-SXM4-40GB", "A100 40GB"),
        ("NVIDIA A100 80GB PCIe", "A100 80GB PCIe"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA GeForce RTX 4090", "RTX 4090"),
        ("NVIDIA GeForce RTX 5090", "RTX 5090"),
        ("NVIDIA B200", "B200"),
    ],
)
def test_known_gpu_names_map_to_their_model(name: str, model: str) -> None:
    peak = lookup(name)
    assert peak is not None and peak.model == model
    assert set(peak.tflops) == {"float32", "tf32", "bfloat16", "float16"}


@pytest.mark.parametrize(
    "name",
    [
        "NVIDIA GH200 480GB",
        "NVIDIA GB200",
        "NVIDIA GeForce RTX 4090 D",
        "NVIDIA H800",
        "Tesla T4",
        "NVIDIA GeForce RTX 4090 Laptop GPU",
        "",
    ],
)
def test_unknown_or_lookalike_gpu_gets_no_peak(name: str) -> None:
    assert lookup(name) is None


def test_dense_figures_not_sparse() -> None:
    """Dense bf16 on H100 SXM is 989 TFLOP/s; the datasheet's 1979 is the 2:4-sparse figure."""
    h100 = lookup("NVIDIA H100 80GB HBM3")
    assert h100 is not None and h100.tflops["bfloat16"] == pytest.approx(989.5)
    assert h100.tflops["float32"] < h100.tflops["tf32"] < h100.tflops["bfloat16"]


def test_percentage_of_unknown_peak_is_none() -> None:
    assert pct_of_peak(500.0, None) is None
    assert pct_of_peak(494.75, 989.5) == 50.0


def test_pcie_link_peak() -> None:
    assert pcie_peak_gbps(4, 16) == pytest.approx(31.5, abs=0.1)
    assert pcie_peak_gbps(5, 16) == pytest.approx(63.0, abs=0.1)
    assert pcie_peak_gbps(None, 16) is None


def test_pcie_link_is_read_through_the_typed_nvml_reader(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """bench's PCIe link comes from probe.nvml_fields inside read_nvml's budget: NVML is the one fake
    (tests/staging/nvml.py, a Gen4 x16 GPU whose current generation is 'not supported'); no GPU here."""
    nvml.install(
        monkeypatch, tmp_path, nvml.state(nvml.gpu(0, pcie_gen_max=4, pcie_width_max=16, pcie_gen=None))
    )
    got = read_nvml(
        lambda pynvml, progress: pcie_link(Fields(pynvml), pynvml.nvmlDeviceGetHandleByIndex(0)),
        lambda exc: None,
    )
    assert got.hang is None
    assert got.value == {
        "max_gen": 4,
        "max_width": 16,
        "curr_gen": None,
        "curr_width": 16,
    }  # not supported: None
    assert got.value is not None and pcie_peak_gbps(
        got.value["max_gen"], got.value["max_width"]
    ) == pytest.approx(31.5, abs=0.1)


# MIG device names as CUDA/NVML report them, with the SM count torch reports for the slice
# (NVIDIA MIG user guide: A100 1g=14, 3g=42, 7g=98 SMs; H100 SXM 1g=16, 3g=60 SMs).
@pytest.mark.parametrize(
    ("name", "sms", "model", "bf16", "mem"),
    [
        (
            "NVIDIA A100-SXM4-80GB MIG 1g.10gb",
            14,
            "A100 80GB SXM MIG 1g.10gb (14/108 SMs, 1/8 memory)",
            40.4,
            254.9,
        ),
        (
            "NVIDIA A100-SXM4-80GB MIG 3g.40gb",
            42,
            "A100 80GB SXM MIG 3g.40gb (42/108 SMs, 4/8 memory)",
            121.3,
            1019.5,
        ),
        (
            "NVIDIA A100-SXM4-40GB MIG 1g.5gb",
            14,
            "A100 40GB MIG 1g.5gb (14/108 SMs, 1/8 memory)",
            40.4,
            194.4,
        ),
        (
            "NVIDIA H100 80GB HBM3 MIG 1g.10gb",
            16,
            "H100 SXM MIG 1g.10gb (16/132 SMs, 1/8 memory)",
            119.9,
            418.8,
        ),
        (
            "NVIDIA H100 80GB HBM3 MIG 3g.40gb",
            60,
            "H100 SXM MIG 3g.40gb (60/132 SMs, 4/8 memory)",
            449.8,
            1675.0,
        ),
        ("NVIDIA H200 MIG 1g.18gb", 16, "H200 SXM MIG 1g.18gb (16/132 SMs, 1/8 memory)", 119.9, 600.0),
    ],
)
def test_mig_slice_gets_per_slice_peaks(name: str, sms: int, model: str, bf16: float, mem: float) -> None:
    peak = lookup(name, sms)
    assert peak is not None and peak.model == model
    assert peak.tflops["bfloat16"] == pytest.approx(bf16) and peak.mem_gbps == pytest.approx(mem)


@pytest.mark.parametrize(
    ("name", "sms"),
    [
        ("NVIDIA A100-SXM4-80GB MIG 3g.40gb", None),  # the "40gb" once matched the A100 40GB entry
        ("NVIDIA H100 80GB HBM3 MIG 3g.40gb", None),  # once got the full H100 SXM peak
        ("NVIDIA H100 80GB HBM3 MIG 1g.10gb", 400),  # more SMs than the card has: not a real slice
        ("NVIDIA A100-SXM4-80GB MIG 1g.25gb", 14),  # not a whole number of memory slices
        ("NVIDIA B200 MIG 1g.23gb", 18),  # no SM/memory figures for B200 in the table
        ("NVIDIA H100 80GB HBM3 MIG", 16),  # no profile in the name
    ],
)
def test_mig_slice_we_cannot_scale_gets_no_peak(name: str, sms: int | None) -> None:
    assert lookup(name, sms) is None
