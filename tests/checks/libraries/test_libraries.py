"""libs.cuda: duplicate NVIDIA distributions, LD_LIBRARY_PATH shadowing, loaded vs pinned.

What is real here: importlib.metadata over dist-info directories written to a temp site dir (METADATA, RECORD with
real sizes and hashes), packaging's marker evaluation, shared libraries compiled with gcc, the dynamic loader's
own search (LD_LIBRARY_PATH before RUNPATH) and its error texts, /proc/self/maps of the child that loaded them,
and the envcheck CLI. What is simulated: torch itself. No CUDA torch can exist on this CPU machine, so a tiny
`torch` package stands in for it, built the way the real wheel is: `torch/_C` is a Python extension linked against
`torch/lib/libtorch_cuda.so`, whose RUNPATH is `$ORIGIN/../../nvidia/nccl/lib` and which needs `ncclCommRegister`
from `libnccl.so.2`; its dist-info carries torch 2.9.1+cu128's real Requires-Dist pins.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest

from envcheck.checks.libraries import SECTION, capture, findings, nvidia_dists, pins, required_by, verdict
from envcheck.checks.libraries import inputs as libraries_inputs
from envcheck.core.errors import UsageError
from envcheck.core.result import Status
from tests.helpers import HEALTHY_H100, ROOT, make_context, run_check, run_cli

# torch 2.9.1+cu128's pins, as pytorch/pytorch writes them (.github/scripts/generate_binary_build_matrix.py,
# PYTORCH_EXTRA_INSTALL_REQUIREMENTS["12.8"]), plus an extra-gated and a Windows-only line that must not count.
TORCH_128_REQUIRES = [
    "nvidia-cuda-runtime-cu12==12.8.90; platform_system == 'Linux' and platform_machine == 'x86_64'",
    "nvidia-cudnn-cu12==9.10.2.21; platform_system == 'Linux' and platform_machine == 'x86_64'",
    "nvidia-nccl-cu12==2.27.5; platform_system == 'Linux' and platform_machine == 'x86_64'",
    "nvidia-nvjitlink-cu12==12.8.93; platform_system == 'Linux' and platform_machine == 'x86_64'",
    "filelock",
    "sympy>=1.13.3",
    'opt-einsum>=3.3; extra == "opt-einsum"',
    "intel-openmp==2025.2.1; platform_system == 'Windows'",
]
# Real import failures, as users reported them:
# https://github.com/pytorch/pytorch/issues/119932 (an older libnccl.so.2 found first)
NCCL_UNDEFINED = (
    "ImportError: /home/test/anaconda3/envs/myenv/lib/python3.9/site-packages/torch/lib/"
    "libtorch_cuda.so: undefined symbol: ncclCommRegister"
)
# https://github.com/infiniflow/ragflow/issues/4466 (LD_LIBRARY_PATH=/usr/local/cuda-12.1/lib64: had libnvJitLink)
NVJITLINK_UNDEFINED = (
    "ImportError: /home/mit/kxyRAG/ragflow/.venv/lib/python3.12/site-packages/torch/lib/../../"
    "nvidia/cusparse/lib/libcusparse.so.12: undefined symbol: __nvJitLinkAddData_12_1, version "
    "libnvJitLink.so.12"
)
# https://github.com/pytorch/pytorch/issues/165812 (torch and the nvidia wheels in different site dirs)
CUDNN_MISSING = "ImportError: libcudnn.so.9: cannot open shared object file: No such file or directory"
# https://github.com/rwth-i6/returnn/issues/1802 (nvidia-nccl-cu11==2.14.3 next to nvidia-nccl-cu12==2.27.3)
NCCL_MEMFREE = (
    "ImportError: /home/runner/.local/lib/python3.10/site-packages/torch/lib/libtorch_cuda.so: "
    "undefined symbol: ncclMemFree"
)


# ---- a real site dir: dist-info written as pip writes it ------------------------------------------------------


def _record_line(site: Path, rel: str) -> str:
    data = (site / rel).read_bytes()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{rel},sha256={digest},{len(data)}"


def install_dist(
    site: Path,
    name: str,
    version: str,
    files: dict[str, bytes] | None = None,
    requires: list[str] | None = None,
    record: list[str] | None = None,
) -> None:
    """A dist-info as pip leaves it: METADATA, and a RECORD listing `files` (written now) with size and hash."""
    for rel, data in (files or {}).items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_bytes(data)
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    meta += [f"Requires-Dist: {r}" for r in requires or []]
    (info / "METADATA").write_text("\n".join(meta) + "\n")
    lines = (record or []) + [_record_line(site, rel) for rel in files or {}]
    lines += [f"{info.name}/METADATA,,", f"{info.name}/RECORD,,"]
    (info / "RECORD").write_text("\n".join(lines) + "\n")


def test_duplicate_nccl_dists_sharing_a_file_are_found_from_real_metadata(tmp_path: Path) -> None:
    """nvidia-nccl-cu12 left behind after switching torch to CUDA 13 (pytorch#186591: `nvidia-nccl-cu12==2.29.3`
    and `nvidia-nccl-cu13==2.29.7` installed together). Both RECORDs list nvidia/nccl/lib/libnccl.so.2; the bytes on
    disk are cu12's (installed last), so cu13's entry is `other-bytes`. The fix uninstalls cu12 and restores cu13,
    whose file that uninstall deletes."""
    site = tmp_path / "site"
    install_dist(site, "nvidia-nccl-cu13", "2.28.9", {"nvidia/nccl/lib/libnccl.so.2": b"cu13 nccl " * 50})
    cu13_record = (site / "nvidia_nccl_cu13-2.28.9.dist-info/RECORD").read_text().splitlines()[0]
    install_dist(site, "nvidia-nccl-cu12", "2.27.3", {"nvidia/nccl/lib/libnccl.so.2": b"cu12 nccl " * 40})
    install_dist(
        site, "nvidia-ml-py", "13.610.43", {"pynvml.py": b"# bindings only\n"}
    )  # no library: not counted
    install_dist(site, "cupy-cuda12x", "13.6.0", requires=["nvidia-nccl-cu12>=2.18"])
    dists = nvidia_dists([str(site)])
    by_name = {d["name"]: d for d in dists}
    assert set(by_name) == {"nvidia-nccl-cu12", "nvidia-nccl-cu13"}
    lib = str((site / "nvidia/nccl/lib/libnccl.so.2").resolve())
    assert by_name["nvidia-nccl-cu12"]["libs"] == [{"path": lib, "state": "ok"}]
    assert by_name["nvidia-nccl-cu13"]["libs"] == [{"path": lib, "state": "other-bytes"}]
    assert "nvidia/nccl/lib/libnccl.so.2" in cu13_record
    users = required_by(["nvidia-nccl-cu12", "nvidia-nccl-cu13"], [str(site)])
    assert users == {"nvidia-nccl-cu12": ["cupy-cuda12x"], "nvidia-nccl-cu13": []}

    data = _section(dists=dists, required_by=users, pins={"nvidia-nccl-cu13": "2.28.9"}, loaded=[lib])
    result = verdict(data, make_context())
    assert result.status is Status.WARN and result.fault_class == "image"
    assert (
        "2 nvidia-nccl distributions are installed (nvidia-nccl-cu13 2.28.9, nvidia-nccl-cu12 2.27.3)"
        in result.summary
    )
    assert f"they share {lib}, which holds nvidia-nccl-cu12's bytes" in result.summary
    assert result.remediation is not None
    assert result.remediation.startswith(
        "pip uninstall -y nvidia-nccl-cu12 && pip install --force-reinstall "
        "--no-deps nvidia-nccl-cu13==2.28.9"
    )
    assert "cupy-cuda12x" in result.remediation
    assert (
        result.measured["libraries"][0]["from"] == "nvidia-nccl-cu12"
    )  # the holder of the bytes, not the pin


def test_duplicates_count_on_a_cpu_only_torch() -> None:
    """No pins (CPU torch) and no CUDA library mapped, yet cublas for CUDA 12 and 13 are both installed."""
    dists = [
        {
            "name": "nvidia-cublas-cu12",
            "version": "12.8.4.1",
            "libs": [{"path": "/s/nvidia/cublas/lib/libcublas.so.12", "state": "ok"}],
        },
        {
            "name": "nvidia-cublas",
            "version": "13.1.0.3",
            "libs": [{"path": "/s/nvidia/cu13/lib/libcublas.so.13", "state": "ok"}],
        },
    ]
    result = verdict(_section(dists=dists, torch_cuda=None), make_context())
    assert result.status is Status.WARN and result.fault_class == "image"
    assert "2 nvidia-cublas distributions" in result.summary
    assert result.remediation == "pip uninstall -y nvidia-cublas-cu12"  # keeps CUDA 13's; no shared file


def test_pins_follow_markers_and_cuda_toolkit_extras(tmp_path: Path) -> None:
    """torch on CUDA 13 pins `cuda-toolkit[cublas,cudart]==13.0.2`; cuda-toolkit's extras pin the libraries
    (https://pypi.org/project/cuda-toolkit/13.2.2/: cublas -> nvidia-cublas, cudart -> nvidia-cuda-runtime; the
    versions are those installed with cuda-toolkit 13.0.2 on the H100 in docs/gpu-evidence)."""
    got = pins(TORCH_128_REQUIRES)
    assert got == {
        "nvidia-cuda-runtime-cu12": "12.8.90",
        "nvidia-cudnn-cu12": "9.10.2.21",
        "nvidia-nccl-cu12": "2.27.5",
        "nvidia-nvjitlink-cu12": "12.8.93",
    }
    site = tmp_path / "site"
    install_dist(
        site,
        "cuda-toolkit",
        "13.0.2",
        requires=[
            'nvidia-cublas==13.1.0.3; extra == "cublas"',
            'nvidia-cuda-runtime==13.0.96; extra == "cudart"',
            'nvidia-cufft==12.0.0.61; extra == "cufft"',
        ],
    )
    torch_13 = [
        'cuda-toolkit[cublas,cudart]==13.0.2; platform_system == "Linux"',
        "nvidia-nccl-cu13 (==2.28.9) ; platform_machine == 'x86_64'",
    ]
    got = pins(torch_13, lambda name: libraries_inputs._requires(name, [str(site)]))
    assert got == {
        "cuda-toolkit": "13.0.2",
        "nvidia-cublas": "13.1.0.3",
        "nvidia-cuda-runtime": "13.0.96",
        "nvidia-nccl-cu13": "2.28.9",
    }


def test_installed_version_other_than_the_pin_is_an_image_finding() -> None:
    """`pip install -U nvidia-nccl-cu12` after torch: the loaded wheel copy is 2.28.3, torch pins 2.27.5."""
    lib = "/s/nvidia/nccl/lib/libnccl.so.2"
    data = _section(
        dists=[{"name": "nvidia-nccl-cu12", "version": "2.28.3", "libs": [{"path": lib, "state": "ok"}]}],
        pins={"nvidia-nccl-cu12": "2.27.5"},
        loaded=[lib],
    )
    result = verdict(data, make_context())
    assert result.status is Status.WARN and result.fault_class == "image"
    assert result.summary == "nvidia-nccl-cu12 2.28.3 is installed, torch 2.9.1+cu128 pins 2.27.5"
    assert result.remediation == "pip install nvidia-nccl-cu12==2.27.5"


# ---- pure verdicts for the real import errors --------------------------------------------------------------------


def _section(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "torch_installed": True,
        "torch_version": "2.9.1+cu128",
        "torch_cuda": "12.8",
        "import_error": None,
        "pins": {},
        "dists": [],
        "required_by": {},
        "loaded": [],
        "ld_library_path": [],
        "ld_preload": [],
    }
    return {**base, **over}


NCCL_WHEEL = {
    "name": "nvidia-nccl-cu12",
    "version": "2.27.5",
    "libs": [{"path": "/venv/site/nvidia/nccl/lib/libnccl.so.2", "state": "ok"}],
}


def test_undefined_nccl_symbol_with_an_older_libnccl_on_ld_library_path_is_config() -> None:
    data = _section(
        torch_cuda=None,
        import_error=NCCL_UNDEFINED,
        dists=[NCCL_WHEEL],
        pins={"nvidia-nccl-cu12": "2.27.5"},
        ld_library_path=[
            {"dir": "/usr/local/nvidia/lib64", "libs": {}},
            {"dir": "/opt/nccl-2.18/lib", "libs": {"libnccl.so.2": "/opt/nccl-2.18/lib/libnccl.so.2.18.3"}},
        ],
    )
    result = verdict(data, make_context())
    assert result.status is Status.FAIL and result.fault_class == "config"
    assert result.summary.startswith(
        "torch cannot import: libtorch_cuda.so needs ncclCommRegister, which the "
        "libnccl the loader found lacks (older); it came from LD_LIBRARY_PATH "
        "(/opt/nccl-2.18/lib)"
    )
    assert (
        "the wheel's copy is /venv/site/nvidia/nccl/lib/libnccl.so.2 (nvidia-nccl-cu12 2.27.5)"
        in result.summary
    )
    assert result.remediation is not None
    assert result.remediation.startswith(
        "export LD_LIBRARY_PATH=/usr/local/nvidia/lib64  # remove /opt/nccl-2.18/lib"
    )


def test_undefined_nvjitlink_symbol_names_the_versioned_library() -> None:
    data = _section(
        torch_cuda=None,
        import_error=NVJITLINK_UNDEFINED,
        ld_library_path=[
            {
                "dir": "/usr/local/cuda-12.1/lib64",
                "libs": {
                    "libnvJitLink.so.12": "/usr/local/cuda-12.1/targets/x86_64-linux/lib/libnvJitLink.so.12.1.105"
                },
            }
        ],
    )
    result = verdict(data, make_context())
    assert result.status is Status.FAIL and result.fault_class == "config"
    assert (
        "libcusparse.so.12 needs __nvJitLinkAddData_12_1, which the libnvJitLink the loader found lacks"
        in result.summary
    )
    assert result.remediation is not None and result.remediation.startswith("unset LD_LIBRARY_PATH")


def test_undefined_nccl_symbol_with_two_nccl_dists_is_the_duplicate() -> None:
    cu11 = {"name": "nvidia-nccl-cu11", "version": "2.14.3", "libs": NCCL_WHEEL["libs"]}
    cu12 = {**NCCL_WHEEL, "version": "2.27.3"}
    data = _section(
        torch_cuda=None, import_error=NCCL_MEMFREE, dists=[cu11, cu12], pins={"nvidia-nccl-cu12": "2.27.3"}
    )
    result = verdict(data, make_context())
    assert result.status is Status.FAIL and result.fault_class == "image"
    assert "libtorch_cuda.so needs ncclMemFree" in result.summary
    assert "2 nvidia-nccl distributions are installed" in result.summary
    assert result.remediation == (
        "pip uninstall -y nvidia-nccl-cu11 && pip install --force-reinstall --no-deps "
        "nvidia-nccl-cu12==2.27.3"
    )
    assert len(result.measured["findings"]) == 1  # the duplicate is the import's cause, not a second finding


def test_missing_cudnn_names_the_pin_or_the_split_site_dirs() -> None:
    data = _section(torch_cuda=None, import_error=CUDNN_MISSING, pins={"nvidia-cudnn-cu12": "9.10.2.21"})
    result = verdict(data, make_context())
    assert result.status is Status.FAIL and result.fault_class == "image"
    assert "libcudnn.so.9 is missing" in result.summary and "nvidia-cudnn-cu12==9.10.2.21" in result.summary
    assert result.remediation == "pip install nvidia-cudnn-cu12==9.10.2.21"
    # pytorch#165812: the wheel is installed, in venv/lib, while torch is in venv/lib64
    cudnn = {
        "name": "nvidia-cudnn-cu12",
        "version": "9.10.2.21",
        "libs": [
            {"path": "/venv/lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn.so.9", "state": "ok"}
        ],
    }
    result = verdict({**data, "dists": [cudnn]}, make_context())
    assert "torch and the NVIDIA wheels are in different site-packages" in result.summary
    assert result.remediation is not None
    assert "export LD_LIBRARY_PATH=/venv/lib/python3.11/site-packages/nvidia/cudnn/lib" in result.remediation
    # the file itself was deleted (by uninstalling a duplicate that shared it)
    gone = {**cudnn, "libs": [{**cudnn["libs"][0], "state": "missing"}]}
    result = verdict({**data, "dists": [gone]}, make_context())
    assert "the file is gone" in result.summary
    assert result.remediation == "pip install --force-reinstall --no-deps nvidia-cudnn-cu12==9.10.2.21"


def test_ld_preload_shadowing_is_config() -> None:
    real = "/opt/cudnn/lib/libcudnn.so.9.1.0"
    cudnn = {
        "name": "nvidia-cudnn-cu12",
        "version": "9.10.2.21",
        "libs": [{"path": "/s/nvidia/cudnn/lib/libcudnn.so.9", "state": "ok"}],
    }
    data = _section(dists=[cudnn], pins={"nvidia-cudnn-cu12": "9.10.2.21"}, loaded=[real], ld_preload=[real])
    result = verdict(data, make_context())
    assert result.status is Status.WARN and result.fault_class == "config"
    assert result.summary.startswith(
        f"libcudnn 9.1.0 is loaded from {real}, not the 9.10.2.21 torch pins from LD_PRELOAD ({real})"
    )
    assert result.remediation is not None and result.remediation.startswith("unset LD_PRELOAD")


def test_validate_refuses_malformed_sections_with_one_line() -> None:
    good = _section(dists=[NCCL_WHEEL])
    SECTION.validate(good, "bundle's libraries")
    for bad, where in (
        ([], "must be an object"),
        ({**good, "pins": {"x": 1}}, "pins must map"),
        ({**good, "dists": [{"name": "x", "version": "1", "libs": [{"path": 3}]}]}, "libs[0].path"),
        ({**good, "loaded": [1]}, "loaded must be a list of str"),
        ({**good, "import_error": 5}, "import_error must be str or null"),
    ):
        with pytest.raises(UsageError, match=re.escape(where)) as caught:
            SECTION.validate(bad, "bundle's libraries")
        assert "\n" not in str(caught.value)


# ---- the real loader: a child process that loads the libraries the way torch does --------------------------------

NCCL_NEW = "int ncclCommRegister(void) { return 0; }\nint ncclGetVersion(int *v) { *v = 22705; return 0; }\n"
NCCL_OLD = "int ncclGetVersion(int *v) { *v = 21803; return 0; }\n"  # before ncclCommRegister existed
TORCH_CUDA = "extern int ncclCommRegister(void);\nint torch_uses_nccl(void) { return ncclCommRegister(); }\n"
EXTENSION = """#include <Python.h>
extern int torch_uses_nccl(void);
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_C", NULL, -1, NULL};
PyMODINIT_FUNC PyInit__C(void) { (void)&torch_uses_nccl; return PyModule_Create(&mod); }
"""


def _gcc(src: str, out: Path, *args: str) -> None:
    c = out.with_suffix(out.suffix + ".c")
    c.write_text(src)
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-o", str(out), str(c), *args],
        check=True,
        timeout=60,
        capture_output=True,
    )
    c.unlink()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The compiled pieces: new and old libnccl.so.2, the libtorch_cuda stub, and torch's _C extension."""
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc to build the shared libraries")
    include = sysconfig.get_paths()["include"]
    if not Path(include, "Python.h").exists():
        pytest.skip(f"needs Python.h ({include}) to build torch's stand-in _C extension")
    out = tmp_path_factory.mktemp("built")
    _gcc(NCCL_NEW, out / "libnccl.so.2.27.5", "-Wl,-soname,libnccl.so.2")
    _gcc(NCCL_OLD, out / "libnccl.so.2.18.3", "-Wl,-soname,libnccl.so.2")
    _gcc(
        TORCH_CUDA,
        out / "libtorch_cuda.so",
        str(out / "libnccl.so.2.27.5"),
        "-Wl,-soname,libtorch_cuda.so",
        "-Wl,--enable-new-dtags,-rpath,$ORIGIN/../../nvidia/nccl/lib",
    )  # RUNPATH, as torch's wheel sets it
    ext = out / f"_C{sysconfig.get_config_var('EXT_SUFFIX')}"
    _gcc(
        EXTENSION,
        ext,
        f"-I{include}",
        "-Wl,--no-as-needed",
        str(out / "libtorch_cuda.so"),
        "-Wl,--enable-new-dtags,-rpath,$ORIGIN/lib",
    )
    return {
        "new": out / "libnccl.so.2.27.5",
        "old": out / "libnccl.so.2.18.3",
        "torch_cuda": out / "libtorch_cuda.so",
        "ext": ext,
    }


def make_venv(tmp_path: Path, built: dict[str, Path], ld_nccl: str | None = None) -> tuple[Path, Path]:
    """A site dir laid out as pip leaves torch 2.9.1+cu128 (stand-in) and nvidia-nccl-cu12 2.27.5, and a
    directory holding another libnccl.so.2 (`ld_nccl`: 'new' or 'old' build) for LD_LIBRARY_PATH."""
    site, ldp = tmp_path / "site", tmp_path / "opt-nccl" / "lib"
    install_dist(
        site, "nvidia-nccl-cu12", "2.27.5", {"nvidia/nccl/lib/libnccl.so.2": built["new"].read_bytes()}
    )
    (site / "torch/lib").mkdir(parents=True)
    shutil.copy(built["torch_cuda"], site / "torch/lib/libtorch_cuda.so")
    shutil.copy(built["ext"], site / "torch" / built["ext"].name)
    (site / "torch/version.py").write_text("__version__ = '2.9.1+cu128'\ncuda = '12.8'\n")
    (site / "torch/__init__.py").write_text(
        "from torch import version\nfrom torch._C import *  # noqa: F403\n"
    )
    install_dist(
        site,
        "torch",
        "2.9.1+cu128",
        requires=TORCH_128_REQUIRES,
        record=["torch/__init__.py,,", "torch/version.py,,"],
    )
    if ld_nccl:
        ldp.mkdir(parents=True)
        version = "2.27.5" if ld_nccl == "new" else "2.18.3"
        shutil.copy(built[ld_nccl], ldp / f"libnccl.so.{version}")
        (ldp / "libnccl.so.2").symlink_to(
            f"libnccl.so.{version}"
        )  # as ldconfig / the NCCL tarball lays it out
    return site, ldp


def capture_in_child(site: Path, ld_library_path: str | None) -> dict[str, Any]:
    """Run the section's capture in a fresh Python whose loader sees LD_LIBRARY_PATH from its start."""
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LD_PRELOAD")}
    env["PYTHONPATH"] = f"{site}{os.pathsep}{ROOT}"
    if ld_library_path is not None:
        env["LD_LIBRARY_PATH"] = ld_library_path
    code = "import json; from envcheck.checks.libraries import capture; print(json.dumps(capture()))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    data: dict[str, Any] = json.loads(done.stdout)
    SECTION.validate(data, "captured")
    return data


def test_the_wheels_libnccl_wins_without_ld_library_path(tmp_path: Path, built: dict[str, Path]) -> None:
    site, _ = make_venv(tmp_path, built)
    data = capture_in_child(site, None)
    wheel = str((site / "nvidia/nccl/lib/libnccl.so.2").resolve())
    assert data["import_error"] is None and data["torch_cuda"] == "12.8"
    assert wheel in data["loaded"]
    result = verdict(data, make_context())
    assert result.status is Status.PASS, result.summary
    assert result.summary == "NVIDIA libraries loaded: 1 from torch's pinned wheels (libnccl.so.2 2.27.5)"
    assert result.measured["libraries"] == [
        {
            "library": "libnccl.so.2",
            "path": wheel,
            "from": "nvidia-nccl-cu12",
            "version": "2.27.5",
            "pinned": "nvidia-nccl-cu12==2.27.5",
        }
    ]


def test_ld_library_path_copy_wins_over_runpath_and_is_named(tmp_path: Path, built: dict[str, Path]) -> None:
    """The loader searches LD_LIBRARY_PATH before torch's RUNPATH: a libnccl.so.2.18.3 (with the symbol torch
    needs, so the import works) shadows the wheel's 2.27.5. The verdict names the path that won, the entry to drop
    and the wheel's copy."""
    site, ldp = make_venv(tmp_path, built, ld_nccl="old")
    (ldp / "libnccl.so.2.18.3").unlink()
    shutil.copy(built["new"], ldp / "libnccl.so.2.18.3")  # an older NCCL that has ncclCommRegister
    keep = tmp_path / "nvidia-driver-lib64"
    keep.mkdir()
    data = capture_in_child(site, f"{keep}:{ldp}")
    won = str((ldp / "libnccl.so.2.18.3").resolve())
    assert won in data["loaded"] and data["import_error"] is None
    result = verdict(data, make_context())
    assert result.status is Status.WARN and result.fault_class == "config"
    assert result.summary.startswith(
        f"libnccl 2.18.3 is loaded from {won}, not the 2.27.5 torch pins from "
        f"LD_LIBRARY_PATH ({ldp}): the wheel's copy is "
        f"{(site / 'nvidia/nccl/lib/libnccl.so.2').resolve()} (nvidia-nccl-cu12 2.27.5)"
    )
    assert result.remediation == (
        f"export LD_LIBRARY_PATH={keep}  # remove {ldp} so torch loads the wheel's libnccl"
    )


def test_an_older_libnccl_on_ld_library_path_breaks_the_import_and_is_named(
    tmp_path: Path, built: dict[str, Path]
) -> None:
    """The real loader's error for pytorch#119932's case: the capture survives `import torch` failing, keeps the
    text, and the verdict blames the LD_LIBRARY_PATH entry."""
    site, ldp = make_venv(tmp_path, built, ld_nccl="old")
    data = capture_in_child(site, str(ldp))
    assert data["import_error"] == (
        f"ImportError: {site}/torch/lib/libtorch_cuda.so: undefined symbol: ncclCommRegister"
    )
    result = verdict(data, make_context())
    assert result.status is Status.FAIL and result.fault_class == "config"
    assert f"it came from LD_LIBRARY_PATH ({ldp})" in result.summary
    assert result.remediation == f"unset LD_LIBRARY_PATH  # remove {ldp} so torch loads the wheel's libnccl"


def test_a_missing_library_breaks_the_import_and_names_the_pin(
    tmp_path: Path, built: dict[str, Path]
) -> None:
    """The wheel's libnccl.so.2 deleted (what uninstalling a duplicate that shares it does): the loader's own
    `cannot open shared object file`, and the fix restores the distribution whose RECORD lists the file."""
    site, _ = make_venv(tmp_path, built)
    (site / "nvidia/nccl/lib/libnccl.so.2").unlink()
    data = capture_in_child(site, None)
    assert data["import_error"] == (
        "ImportError: libnccl.so.2: cannot open shared object file: No such file or directory"
    )
    result = verdict(data, make_context())
    assert result.status is Status.FAIL and result.fault_class == "image"
    assert "nvidia-nccl-cu12 2.27.5 lists" in result.summary and "the file is gone" in result.summary
    assert result.remediation == "pip install --force-reinstall --no-deps nvidia-nccl-cu12==2.27.5"


def test_cli_reports_a_broken_torch_import_as_fail_not_error(tmp_path: Path, built: dict[str, Path]) -> None:
    """Through the engine (fork server, worker): the stand-in torch fails to import in both; libs.cuda still
    answers with the library cause."""
    site, ldp = make_venv(tmp_path, built, ld_nccl="old")
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{ROOT}", "LD_LIBRARY_PATH": str(ldp)}
    done = run_cli("run", "--only", "libs.cuda", "--json", "-", env=env, timeout=120)
    assert done.returncode == 1, done.stderr
    (result,) = json.loads(done.stdout)["results"]
    assert result["status"] == "fail" and result["fault_class"] == "config"
    assert "ncclCommRegister" in result["summary"] and str(ldp) in result["summary"]


def test_bundle_of_a_host_whose_torch_cannot_import_is_captured_and_explained(
    tmp_path: Path, built: dict[str, Path]
) -> None:
    """`envcheck facts --bundle` where `import torch` fails: the capture (cuda and libraries sections) survives,
    and `explain` names the import failure (cuda.available) and its library cause (libs.cuda)."""
    site, ldp = make_venv(tmp_path, built, ld_nccl="old")
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{ROOT}", "LD_LIBRARY_PATH": str(ldp)}
    bundle = tmp_path / "bundle.json"
    done = run_cli("facts", "--bundle", str(bundle), env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    data = json.loads(bundle.read_text())
    assert data["cuda"]["torch_error"].startswith("import torch failed: ImportError: ")
    assert "undefined symbol: ncclCommRegister" in data["libraries"]["import_error"]
    explained = run_cli(
        "explain", str(bundle), "--json", "-"
    )  # anywhere: no LD_LIBRARY_PATH, real torch here
    results = {r["name"]: r for r in json.loads(explained.stdout)["results"]}
    assert results["cuda.available"]["summary"].startswith(
        "CUDA is not available: torch cannot be imported (ImportError: "
    )
    assert "libs.cuda" in results["cuda.available"]["remediation"]
    libs = results["libs.cuda"]
    assert libs["status"] == "fail" and libs["fault_class"] == "config" and str(ldp) in libs["summary"]


# ---- live, and the bundle round trip -------------------------------------------------------------------------


def test_live_check_on_this_host() -> None:
    """This host: CPU torch, no NVIDIA distributions: pass, saying there is nothing to check."""
    data = capture()
    result = run_check("libs.cuda")
    if data["torch_cuda"] is None and not data["dists"]:
        assert result.status is Status.PASS and "CPU-only" in result.summary
    else:
        assert result.status is verdict(data, make_context()).status


def test_bundle_capture_then_explain_replays_the_section(tmp_path: Path) -> None:
    """`envcheck facts --bundle` captures the section here; `explain` replays libs.cuda from it, and from a bundle
    whose section shows the shadowing found above."""
    bundle = tmp_path / "bundle.json"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    done = run_cli("facts", "--bundle", str(bundle), env=env)
    assert done.returncode == 0, done.stderr
    data = json.loads(bundle.read_text())
    assert data["libraries"]["torch_installed"] is True
    explained = run_cli("explain", str(bundle), "--json", "-", "--allow-cpu", env=env)
    results = {r["name"]: r for r in json.loads(explained.stdout)["results"]}
    assert results["libs.cuda"]["status"] == run_check("libs.cuda").status.value

    h100 = json.loads(HEALTHY_H100.read_text())
    h100["libraries"] = _section(
        dists=[NCCL_WHEEL],
        pins={"nvidia-nccl-cu12": "2.27.5"},
        loaded=["/opt/nccl-2.18/lib/libnccl.so.2.18.3"],
        ld_library_path=[
            {"dir": "/opt/nccl-2.18/lib", "libs": {"libnccl.so.2": "/opt/nccl-2.18/lib/libnccl.so.2.18.3"}}
        ],
    )
    path = tmp_path / "h100.json"
    path.write_text(json.dumps(h100))
    explained = run_cli("explain", str(path), "--json", "-")
    results = {r["name"]: r for r in json.loads(explained.stdout)["results"]}
    libs = results["libs.cuda"]
    assert libs["status"] == "warn" and libs["fault_class"] == "config"
    assert "from LD_LIBRARY_PATH (/opt/nccl-2.18/lib)" in libs["summary"]
    assert libs["remediation"].startswith("unset LD_LIBRARY_PATH")


def test_a_malformed_section_in_a_bundle_is_one_line(tmp_path: Path) -> None:
    h100 = json.loads(HEALTHY_H100.read_text())
    h100["libraries"] = {**_section(), "loaded": "not a list"}
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(h100))
    done = run_cli("explain", str(path))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "libraries.loaded must be list" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_a_source_build_linked_to_system_cuda_passes() -> None:
    """An NGC-style torch built against /usr/local/cuda: no nvidia-* wheels, no pins, nothing shadowed."""
    loaded = [
        "/usr/local/cuda-12.8/targets/x86_64-linux/lib/libcudart.so.12.8.90",
        "/usr/lib/x86_64-linux-gnu/libnccl.so.2.25.1",
    ]
    result = verdict(_section(loaded=loaded), make_context())
    assert result.status is Status.PASS
    assert (
        result.summary
        == f"NVIDIA libraries loaded: 2 from the system, as this torch build expects ({', '.join(loaded)})"
    )


def test_no_torch_skips_as_the_live_check_does() -> None:
    assert verdict(_section(torch_installed=False, torch_version=None), make_context()).status is Status.SKIP


def test_findings_on_a_healthy_section_are_empty() -> None:
    data = _section(
        dists=[NCCL_WHEEL],
        pins={"nvidia-nccl-cu12": "2.27.5"},
        loaded=["/venv/site/nvidia/nccl/lib/libnccl.so.2"],
    )
    assert findings(data)[0] == []
