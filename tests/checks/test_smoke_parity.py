"""Parity with PyTorch's release smoke test (pytorch/pytorch .ci/pytorch/smoke_test/smoke_test.py) and torchvision's
(pytorch/vision test/smoke_test.py): build.openmp, build.nvshmem, linalg.svd, numpy.interop, cuda.device_assert,
cuda.gds, vision.decoders (the compile points: test_compile_smoke.py; the decoders in the image:
tests/images/test_smoke_parity_image.py).

Real here: every check's healthy run on this CPU torch; numpy.interop's fault (a numpy torch cannot initialise,
on PYTHONPATH: torch's own "Failed to initialize NumPy" and "RuntimeError: Numpy is not available"). Staged: what
cannot exist on this machine (a torch built without OpenMP or NVSHMEM, a wrong cuSOLVER, a GPU), fed to each
check's pure verdict. The `gpu` tests are the GPU proof's (`pytest -m gpu`): each check passes on a real GPU.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from envcheck.checks.build.compiled_in import nvshmem_verdict, openmp_verdict
from envcheck.checks.cuda.runtime_errors import assert_verdict, gds_verdict
from envcheck.checks.linalg import svd_verdict
from envcheck.checks.numpy_interop import interop_verdict
from envcheck.checks.vision_decoders import decoders_verdict
from envcheck.core.result import Status
from tests.helpers import no_gpu_env, run_check

# torch's own messages for these faults (cited in the checks): pytorch/pytorch#132179
NUMPY_GONE = "RuntimeError: Numpy is not available"
# cuSOLVER's failure as torch raises it (torch/csrc/.../CUDASolver: "cusolver error: ..."), e.g. pytorch/pytorch#31930
CUSOLVER = (
    "RuntimeError: cusolver error: CUSOLVER_STATUS_INTERNAL_ERROR, when calling `cusolverDnSgesvdj( handle)`"
)


def test_openmp_healthy_and_missing() -> None:
    real = run_check("build.openmp", env=no_gpu_env())
    assert real.status is Status.PASS and real.measured["openmp"] is True, real.summary
    staged = openmp_verdict(False, 1, "2.11.0+git1234", "13.0")  # a source build without OpenMP
    assert staged.status is Status.FAIL and staged.fault_class == "image" and staged.code == "build.no_openmp"
    assert (
        "pip install --force-reinstall torch==2.11.0 --index-url https://download.pytorch.org/whl/cu130"
        in (staged.remediation or "")
    )


def test_nvshmem_healthy_twin_and_the_build_without_it() -> None:
    real = run_check("build.nvshmem", env=no_gpu_env())  # this CPU torch: not a CUDA feature
    assert real.status is Status.SKIP and "CPU build" in real.summary
    missing = nvshmem_verdict("2.11.0", "13.0", None, "cannot import name '_is_nvshmem_available'")
    assert (
        missing.status is Status.FAIL
        and missing.fault_class == "image"
        and missing.code == "build.no_nvshmem"
    )
    assert nvshmem_verdict("2.8.0", "12.8", None, "cannot import name").status is Status.SKIP  # before 2.9
    present = nvshmem_verdict("2.11.0", "13.0", False, None)  # compiled in, no GPU to load it on
    assert present.status is Status.PASS and present.measured == {
        "nvshmem_compiled": True,
        "nvshmem_available": False,
    }


def test_svd_healthy_and_its_faults() -> None:
    real = run_check("linalg.svd", env=no_gpu_env())
    assert real.status is Status.PASS, real.summary
    assert max(real.measured["devices"]["cpu"].values()) < 1e-5
    good = {"5x3 reduced float32": 1e-7}
    cpu_wrong = svd_verdict({"cpu": {"5x3 reduced float32": 0.3}}, "2.11.0", "13.0")
    assert (cpu_wrong.status, cpu_wrong.fault_class, cpu_wrong.code) == (
        Status.FAIL,
        "image",
        "linalg.svd_wrong",
    )
    gpu_wrong = svd_verdict({"cpu": good, "cuda:3": {"20x16x50x100 batch float64": 1e-3}}, "2.11.0", "13.0")
    assert (gpu_wrong.status, gpu_wrong.fault_class) == (
        Status.FAIL,
        "node",
    ) and "cuda:3" in gpu_wrong.summary
    raised = svd_verdict({"cpu": good, "cuda:0": CUSOLVER}, "2.11.0", "13.0")
    assert (raised.status, raised.fault_class, raised.code) == (Status.FAIL, "image", "linalg.svd_error")
    assert "CUSOLVER_STATUS_INTERNAL_ERROR" in raised.summary and "libcusolver" in (raised.remediation or "")


@pytest.fixture
def broken_numpy(tmp_path: Path) -> Path:
    """A numpy that imports but that torch cannot initialise (no C API, as "_ARRAY_API not found"), first on the path,
    as a NumPy that torch was not built for behaves: enough names for `import torch` (torch.utils.data registers
    collate functions for np.ndarray, np.bool_, np.number, np.object_, np.memmap), none of numpy's C API."""
    pkg = tmp_path / "numpy"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "__version__ = '2.0.0'\nclass ndarray: pass\nclass generic: pass\nclass memmap(ndarray): pass\n"
        "class bool_(generic): pass\nclass number(generic): pass\nclass object_(generic): pass\n"
        "def arange(*a, **k):\n    raise AssertionError('torch refuses first')\n"
    )
    return tmp_path


def test_numpy_interop_healthy_and_a_numpy_torch_cannot_use(broken_numpy: Path) -> None:
    real = run_check("numpy.interop", env=no_gpu_env())
    assert real.status is Status.PASS and real.measured["values_ok"] is True, real.summary
    env = {**no_gpu_env(), "PYTHONPATH": str(broken_numpy)}
    broken = run_check("numpy.interop", env=env)
    assert (
        broken.status is Status.FAIL and broken.fault_class == "image" and broken.code == "numpy.abi_mismatch"
    )
    assert NUMPY_GONE in broken.summary, broken.summary
    old = interop_verdict("2.2.2+cpu", "2.0.0", NUMPY_GONE)  # securefederatedai/openfederatedlearning#999
    assert "pip install 'numpy<2'" in (old.remediation or "")
    missing = interop_verdict("2.11.0", None, None)
    assert missing.status is Status.WARN and missing.code == "numpy.missing"


def test_device_assert_and_gds_verdicts() -> None:
    """Staged outcomes (no GPU here); the real ones are the `gpu` tests below."""
    caught = assert_verdict(
        "CUDA error: device-side assert triggered\nCUDA kernel errors might be asynchronously reported",
        "2.11.0",
        "13.0",
    )
    assert caught.status is Status.PASS and caught.restart_worker
    lost = assert_verdict(None, "2.11.0", "13.0")
    assert (lost.status, lost.fault_class, lost.code) == (Status.FAIL, "image", "cuda.assert_lost")
    assert lost.restart_worker
    assert assert_verdict("Assertion failed", "2.11.0", "13.0").code == "cuda.assert_unnamed"
    assert gds_verdict("13.0", True, "cuFileHandleRegister failed: ...", "2.11.0").status is Status.PASS
    assert gds_verdict("13.0", True, None, "2.11.0").status is Status.PASS
    other = gds_verdict("13.0", True, "libcufile.so.0: cannot open shared object file", "2.11.0")
    assert (other.status, other.fault_class, other.code) == (Status.FAIL, "image", "cuda.gds_error")
    assert gds_verdict("12.4", True, None, "2.5.0").status is Status.SKIP
    assert run_check("cuda.device_assert", env=no_gpu_env()).status is Status.SKIP  # needs a GPU


def test_decoders_verdicts() -> None:
    """Staged (torchvision is not in the test venv; the real decoders: tests/images/test_smoke_parity_image.py)."""
    good = {
        "turbo": True,
        "png_exact": True,
        "jpeg_mean_error": 0.5,
        "webp_exact": True,
        "nvjpeg_mean_error": {},
    }
    assert decoders_verdict("0.26.0", "2.11.0", good).status is Status.PASS
    slow = decoders_verdict("0.26.0", "2.11.0", {**good, "turbo": False})
    assert (slow.status, slow.code) == (Status.WARN, "vision.no_turbo")
    wrong = decoders_verdict("0.26.0", "2.11.0", {**good, "nvjpeg_mean_error": {"cuda:1": 40.0}})
    assert wrong.code == "vision.decode_wrong" and "nvJPEG on cuda:1" in wrong.summary
    gone = decoders_verdict("0.26.0", "2.11.0", "RuntimeError: No such operator image::decode_png")
    assert (gone.status, gone.fault_class, gone.code) == (Status.FAIL, "image", "vision.decoders_missing")
    assert run_check("vision.decoders", env=no_gpu_env()).status is Status.SKIP  # no torchvision here


GPU_CHECKS = [
    "cuda.device_assert",
    "cuda.gds",
    "linalg.svd",
    "build.nvshmem",
    "vision.decoders",
    "compile.toolchain",
    "compile.max_autotune",
]


@pytest.mark.gpu
@pytest.mark.parametrize("check", GPU_CHECKS)
def test_smoke_test_points_pass_on_a_real_gpu(check: str) -> None:
    """The GPU proof: each point of the smoke tests passes on every GPU of a healthy host (cuda:N in `devices`
    where the check measures per device; a compile check on one GPU of each model, envcheck.reference.devices)."""
    import torch

    from envcheck.reference.devices import gpu_model, torch_index

    result = run_check(check, allow_cpu=False)
    assert result.status is Status.PASS, (result.summary, result.details)
    devices = result.measured.get("devices")
    if isinstance(devices, dict):
        count = torch.cuda.device_count()
        if check.startswith("compile."):  # one GPU of each model (which one is the worker's choice)
            models = {gpu_model(torch_index(d)) for d in devices if d != "cpu"}
            assert models == {gpu_model(i) for i in range(count)}, devices
        else:
            assert {f"cuda:{i}" for i in range(count)} <= set(devices), devices


def test_a_numpy_that_breaks_import_torch_is_named(tmp_path: Path) -> None:
    """The other real shape (the Windows reports cited in numpy_interop: the failure comes from `import torch`
    itself, in torch.utils.data's collate registration): a numpy without np.ndarray."""
    (tmp_path / "numpy").mkdir()
    (tmp_path / "numpy" / "__init__.py").write_text("__version__ = '2.0.0'\n")
    got = run_check("numpy.interop", env={**no_gpu_env(), "PYTHONPATH": str(tmp_path)})
    assert got.status is Status.FAIL and got.code == "numpy.abi_mismatch", got.summary
    assert "import torch: AttributeError: module 'numpy' has no attribute 'ndarray'" in got.summary
