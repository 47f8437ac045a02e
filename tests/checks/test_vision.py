"""vision.ops: the classic torch/torchvision mismatch, produced for real, must fail with the fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envcheck.checks.vision_pairing import (
    cuda_mismatch,
    fix_command,
    matching_torchvision,
    pair_fix,
    pairing_problem,
    torch_pin,
)
from envcheck.core.result import Status
from tests.helpers import run_check, run_cli


def test_matching_pairs() -> None:
    assert matching_torchvision("2.8.0") == "0.23"
    assert matching_torchvision("2.13.0+cpu") == "0.28"
    assert "torch==2.9.1 torchvision==0.24.*" in fix_command("2.9.1+cu128")


@pytest.mark.parametrize(
    "torch_v, tv_v, pin, problem",
    [
        ("2.14.1+cu130", "0.29.2", None, None),
        ("2.9.1", "0.24.1", "2.9.1", None),
        # torchvision 0.29.2 declares only torch>=2.14.0, so unpinned pip pairs it with torch 2.15.0
        ("2.15.0+cu132", "0.29.2", None, "torch 2.15.0+cu132 pairs with torchvision 0.30.x"),
        ("2.13.0+cpu", "0.26.0", "2.11.0", "was built for torch 2.11.0"),
    ],
)
def test_pairing_rule(torch_v: str, tv_v: str, pin: str | None, problem: str | None) -> None:
    found = pairing_problem(torch_v, tv_v, pin)
    assert (found is None) if problem is None else (found is not None and problem in found)


@pytest.mark.parametrize(
    "torch_cuda, tv_cuda, problem",
    [
        ("13.0", "13.2", None),  # PyPI's real pair: torch 2.14.1 (13.0) with torchvision 0.29.2 (13.2)
        ("13.0", "13.0", None),
        (None, None, None),
        ("12.8", "13.0", "different major versions"),
        (None, "12.8", "torch for CUDA none (CPU)"),
        ("12.8", None, "torchvision is built for CUDA none (CPU)"),
    ],
)
def test_cuda_mismatch_is_about_the_major_version(
    torch_cuda: str | None, tv_cuda: str | None, problem: str | None
) -> None:
    found = cuda_mismatch(torch_cuda, tv_cuda)
    assert (found is None) if problem is None else (found is not None and problem in found)


@pytest.mark.parametrize(
    "requires, pin",
    [
        (
            ["torch (==2.11.0)", "numpy", "pillow (!=8.3.*,>=5.3.0)"],
            "2.11.0",
        ),  # torchvision 0.26's METADATA form
        (["numpy", "torch==2.9.1"], "2.9.1"),
        (["torch (==2.8.0+cu128) ; platform_system == 'Linux'"], "2.8.0+cu128"),
        (["torch>=2.14.0"], None),  # only a bound: the release rule decides
        (["torchaudio==2.9.1", "not a requirement ((("], None),
    ],
)
def test_torchvision_pin_reads_every_metadata_form(requires: list[str], pin: str | None) -> None:
    assert torch_pin(requires) == pin


def test_parenthesised_pin_now_names_the_torch_this_torchvision_was_built_for() -> None:
    problem = pairing_problem("2.13.0+cpu", "0.26.0", torch_pin(["torch (==2.11.0)"]))
    assert problem is not None and "was built for torch 2.11.0" in problem


def test_pair_fix_offers_the_torch_this_torchvision_was_built_for() -> None:
    fix = pair_fix("2.15.0+cu132", "0.29.2")
    assert fix.startswith("pip install --force-reinstall torch==2.14.* torchvision==0.29.2")
    assert "torch==2.15.0 torchvision==0.30.*" in fix


@pytest.fixture(scope="module")
def cuda_torchvision(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The CUDA torchvision wheel from PyPI, unpacked next to (not replacing) this venv's torch."""
    import torch

    if torch.version.cuda is not None:
        pytest.skip("this venv's torch is a CUDA build; the mismatch needs a CPU-only torch")
    target = tmp_path_factory.mktemp("tv")
    tv = matching_torchvision(torch.__version__)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(target),
            f"torchvision=={tv}.*",
        ],
        check=True,
        timeout=600,
    )
    return target


def test_cuda_torchvision_on_cpu_torch_fails_with_the_fix(cuda_torchvision: Path) -> None:
    """Real: PyPI's CUDA torchvision beside this venv's CPU torch. vision.ops loads the ops library directly and
    must name the loader's reason (torch's libc10_cuda is missing), not 'reinstalling will not help';
    vision.import sees torchvision's own 'operator torchvision::nms does not exist'. Both give the pair fix."""
    env = {**os.environ, "PYTHONPATH": f"{cuda_torchvision}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = run_cli(
        "run", "--level", "full", "--only", "vision.ops,vision.import", "--allow-cpu", "--json", "-", env=env
    )
    assert done.returncode == 1, done.stderr
    results = {r["name"]: r for r in json.loads(done.stdout)["results"]}
    for result in results.values():
        assert result["status"] == "fail", result
        assert result["fault_class"] == "image"
        assert "torchvision" in result["summary"]
        assert "--force-reinstall torch==" in result["remediation"]
        assert "from ONE index" in result["remediation"]
    assert "libc10_cuda.so" in results["vision.ops"]["summary"]
    assert "a CUDA torchvision with a CPU-only torch" in results["vision.ops"]["summary"]


@pytest.mark.parametrize(
    "error, cause",
    [
        # torch.ops.load_library's wrapper and the loader's reason, as vision.ops sees them for a CUDA torchvision on
        # a CPU torch (seen for real in the test above).
        (
            "Could not load this library: /x/torchvision/_C.so; libc10_cuda.so: cannot open shared object file: No such "
            "file or directory",
            "need libc10_cuda.so",
        ),
        # A cu12 torchvision beside a cu13 torch (the CUDA runtime of the other major is not installed).
        (
            "libcudart.so.12: cannot open shared object file: No such file or directory",
            "need libcudart.so.12",
        ),
        # torchvision's own words after its import swallowed the loader's reason (pytorch/vision#8181 and many others).
        ("operator torchvision::nms does not exist", "built for another torch or CUDA"),
        (
            "/x/torchvision/_C.so: undefined symbol: _ZN3c1017RegisterOperatorsD1Ev",
            "built for another torch or CUDA",
        ),
        ("No module named 'PIL'", None),
    ],
)
def test_build_mismatch_reads_the_loaders_reason(error: str, cause: str | None) -> None:
    from envcheck.checks.vision_pairing import build_mismatch

    found = build_mismatch(error)
    assert (found is None) if cause is None else (cause in (found or "")), found


def test_missing_torchvision_skips_with_the_reason() -> None:
    """Real: this venv has torch and no torchvision, and no /etc/envcheck/image.json (this was once a FAIL: an
    optional library that is not installed is no fault)."""
    import importlib.util

    if importlib.util.find_spec("torchvision") is not None:
        pytest.skip("torchvision is installed in this venv")
    if Path("/etc/envcheck/image.json").exists():
        pytest.skip("this host is an envcheck image; the declared case is the next test")
    result = run_check("vision.ops")
    assert result.status is Status.SKIP, result
    assert "torchvision is not installed and no envcheck image declares it" in (result.reason or "")
    assert result.fault_class is None


def test_missing_torchvision_fails_when_the_image_declares_it_with_the_images_own_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The image declaration is injected (read_declared patched); torchvision is really absent here. vision.ops
    and image.versions must offer the same fix, never opposite ones."""
    import importlib.util

    from envcheck.checks import image, vision_install

    if importlib.util.find_spec("torchvision") is not None:
        pytest.skip("torchvision is installed in this venv")
    import torch

    base = torch.__version__.split("+")[0]
    declared = {
        "torch": base,
        "torchvision": "0.28.0",
        "torchaudio": None,
        "cuda": "cpu",
        "index_url": "https://download.pytorch.org/whl/cpu",
    }
    monkeypatch.setattr(vision_install, "read_declared", lambda: declared)
    result = run_check("vision.ops", isolated=False)
    assert result.status is Status.FAIL and result.fault_class == "image"
    assert "this image declares torchvision 0.28.0" in result.summary
    drift = image.compare_versions(
        declared,
        {},
        installed=lambda: {
            "torch": torch.__version__,
            "torchvision": None,
            "torchaudio": None,
            "cuda": "cpu",
        },
    )
    assert drift.status is Status.FAIL and drift.remediation == result.remediation


@pytest.mark.parametrize("check", ["vision.ops", "vision.import"])
def test_a_failing_gpu_is_named_in_vision_ops(monkeypatch: pytest.MonkeyPatch, check: str) -> None:
    """No GPU and no torchvision here: torchvision's metadata, module and ops library are faked, torch.cuda
    reports one fake H100, and the op run on cuda:0 reports the real text of cudaErrorIllegalAddress."""
    import importlib.metadata
    import types

    import torch

    from envcheck.checks import vision

    props = types.SimpleNamespace(
        name="NVIDIA H100 80GB HBM3", uuid="6f1c2d3e-aaaa", pci_bus_id=0x19, pci_domain_id=0, pci_device_id=0
    )
    real_version, real_requires = importlib.metadata.version, importlib.metadata.requires
    base = torch.__version__.split("+")[0]
    monkeypatch.setattr(
        importlib.metadata,
        "version",
        lambda n: f"{matching_torchvision(base)}.0" if n == "torchvision" else real_version(n),
    )
    monkeypatch.setattr(
        importlib.metadata,
        "requires",
        lambda n: [f"torch=={base}"] if n == "torchvision" else real_requires(n),
    )
    fake_tv = types.ModuleType("torchvision")
    fake_tv.version = types.SimpleNamespace(cuda=torch.version.cuda)  # type: ignore[attr-defined]
    fake_tv.ops = types.ModuleType("torchvision.ops")  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torchvision", fake_tv)
    monkeypatch.setitem(sys.modules, "torchvision.ops", fake_tv.ops)  # type: ignore[attr-defined]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i=0: props)
    monkeypatch.setattr(
        vision,
        "_ops_problem",
        lambda ops, device: (
            None
            if device == "cpu"
            else f"torchvision ops fail on {device}: CUDA error: an illegal memory access was encountered"
        ),
    )
    monkeypatch.setattr(vision, "ops_library", lambda: "/fake/torchvision/_C.so")
    monkeypatch.setattr(torch.ops, "load_library", lambda path: None)
    monkeypatch.setattr(
        torch.ops.torchvision,
        "_cuda_version",
        lambda: int(str(torch.version.cuda).replace(".", "0")) * 10 if torch.version.cuda else -1,
        raising=False,
    )
    result = run_check(check, isolated=False)
    assert result.status is Status.FAIL
    assert (
        "on cuda:0 = GPU 0 (NVIDIA H100 80GB HBM3, UUID 6f1c2d3e-aaaa, PCI 00000000:19:00.0)"
        in result.summary
    )
    assert "restarts the worker" in result.summary


@pytest.mark.parametrize(
    "files, found",
    [
        (["_C.so"], "_C.so"),  # torchvision <= 0.28
        (
            ["_C_stable.so", "image_stable.so"],
            "_C_stable.so",
        ),  # 0.29+: torch's stable ABI (seen in make verify's venv)
        (["image.so"], None),  # a layout this envcheck does not know: vision.ops imports the package instead
    ],
)
def test_ops_library_is_found_under_each_torchvision_layout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: list[str], found: str | None
) -> None:
    """Real file lookup (importlib's FileFinder, as torchvision.extension does it) in a torchvision folder laid
    out as each release ships it; the library files are empty stand-ins (only their names are read)."""
    import importlib

    from envcheck.checks.vision_install import ops_library

    package = tmp_path / "torchvision"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name in files:
        (package / name).write_bytes(b"")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    monkeypatch.delitem(sys.modules, "torchvision", raising=False)
    got = ops_library()
    assert got == (str(package / found) if found else None)
