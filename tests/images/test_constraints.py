"""The image keeps its torch: /etc/pip/constraint.txt pins the torch stack, PIP_CONSTRAINT and
UV_CONSTRAINT point at it, a real `pip install` / `uv pip install` of a package needing another torch fails with the
installer's own message and leaves torch as it was, a package that accepts the image's torch installs, and the
documented override (`PIP_CONSTRAINT= ...`) lifts it.

Real parts: the built runtime image, pip and uv inside it, offline (`network_disabled`, `--no-index`): the two small
wheels are made here (a wheel is a zip with METADATA, WHEEL and RECORD), uv's wheel comes from the row's wheelhouse
image. Nothing is staged.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.containers import run_streams

pytestmark = [pytest.mark.docker, pytest.mark.slow]

OTHER_TORCH = (
    "torch==2.10.0"  # what a dependency pins (pytorch/pytorch#168065: a pin swapped the CUDA torch out)
)


def make_wheel(folder: Path, name: str, version: str, requires: list[str]) -> Path:
    """A pure-Python wheel `name` that imports as `name` with `_` and requires `requires`."""
    module = name.replace("-", "_")
    info = f"{module}-{version}.dist-info"
    files = {
        f"{module}.py": "OK = True\n",
        f"{info}/METADATA": (
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
            + "".join(f"Requires-Dist: {r}\n" for r in requires)
        ),
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: envcheck-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }

    def digest(text: str) -> str:
        return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()

    record = "".join(f"{path},sha256={digest(text)},{len(text.encode())}\n" for path, text in files.items())
    files[f"{info}/RECORD"] = record + f"{info}/RECORD,,\n"
    path = folder / f"{module}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name_in_zip, text in files.items():
            zf.writestr(name_in_zip, text)
    return path


# uv's wheel as `pip download` names it in the wheelhouse (envcheck/images/build.py pins UV_VERSION)
UV_WHEEL = "uv-{}-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"


def _wheel_from_wheelhouse(client: Any, image: str, name: str, dest: Path) -> Path | None:
    """Copy one wheel out of the row's wheelhouse image (a scratch image of wheels); None when it is not there."""
    try:
        container = client.containers.create(image, ["/none"])
    except Exception:
        return None
    try:
        stream, _ = container.get_archive(f"/{name}")
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            tar.extractall(dest, filter="data")
    except Exception:
        return None
    finally:
        container.remove(force=True)
    return dest / name


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("wheels")
    make_wheel(folder, "needs-other-torch", "1.0", [OTHER_TORCH])
    make_wheel(folder, "fits-this-torch", "1.0", ["torch>=2.0", "numpy"])
    folder.chmod(0o755)
    return folder


def run_offline(client: Any, image: str, script: str, wheels: Path, **kwargs: Any) -> tuple[int, str, str]:
    """`sh -c script` in the image as its user, no network, the wheels at /wheels (read-only)."""
    return run_streams(
        client,
        image,
        ["sh", "-c", script],
        timeout_s=300,
        network_disabled=True,
        volumes={str(wheels): {"bind": "/wheels", "mode": "ro"}},
        **kwargs,
    )


def test_the_constraints_pin_the_whole_torch_stack(docker_client: Any, runtime_image: str) -> None:
    script = """
import importlib.metadata as md, json, os, re, stat
st = os.stat('/etc/pip/constraint.txt')
pins = [l for l in open('/etc/pip/constraint.txt').read().splitlines() if l and not l.startswith('#')]
names = {re.sub(r'[-_.]+', '-', d.metadata['Name']).lower(): d.version for d in md.distributions()}
print(json.dumps({'env': [os.environ.get('PIP_CONSTRAINT'), os.environ.get('UV_CONSTRAINT')], 'pins': pins,
                  'installed': names, 'owner': st.st_uid, 'mode': oct(stat.S_IMODE(st.st_mode))}))
"""
    code, out, err = run_streams(docker_client, runtime_image, ["python", "-c", script])
    assert code == 0, err
    got = json.loads(out)
    assert got["env"] == ["/etc/pip/constraint.txt"] * 2
    assert (got["owner"], got["mode"]) == (0, "0o644")  # the image's user cannot loosen it by accident
    pins = dict(p.split("==") for p in got["pins"])
    installed = got["installed"]
    for name in (
        "torch",
        "torchvision",
        "torchaudio",
        "triton",
        "cuda-toolkit",
        "nvidia-cublas",
        "nvidia-nccl-cu13",
        "nvidia-cudnn-cu13",
    ):
        assert pins.get(name) == installed[name], (name, pins)
    cuda_wheels = {n for n in installed if n.startswith(("nvidia-", "cuda-"))} - {"nvidia-ml-py"}
    assert cuda_wheels <= set(pins), cuda_wheels - set(pins)
    assert "nvidia-ml-py" not in pins and "prometheus-client" not in pins  # envcheck's own deps stay free


def test_pip_refuses_a_package_that_needs_another_torch(
    docker_client: Any, runtime_image: str, wheels: Path, test_row: Any
) -> None:
    script = (
        'pip install --no-index --find-links /wheels needs-other-torch; echo "needs-other rc=$?"; '
        f"pip install --no-index --find-links /wheels '{OTHER_TORCH}'; echo \"direct rc=$?\"; "
        "python -c 'import torch; print(\"torch after\", torch.__version__)'"
    )
    code, out, err = run_offline(docker_client, runtime_image, script, wheels)
    assert code == 0, out + err
    assert "needs-other rc=1" in out and "direct rc=1" in out, out + err
    # pip's own words (the ERROR lines on stderr, "The conflict is caused by" on stdout): the conflict and the pin
    both = out + err
    assert (
        "Cannot install needs-other-torch==1.0 because these package versions have conflicting dependencies"
        in err
    ), err
    assert f"needs-other-torch 1.0 depends on {OTHER_TORCH}" in both, both
    assert f"The user requested (constraint) torch=={test_row.torch}" in both, both
    assert f"Cannot install {OTHER_TORCH} because these package versions have conflicting dependencies" in err
    assert f"torch after {test_row.torch}" in out  # nothing was replaced


def test_a_package_that_accepts_the_images_torch_installs(
    docker_client: Any, runtime_image: str, wheels: Path, test_row: Any
) -> None:
    script = (
        "pip install --no-index --find-links /wheels fits-this-torch && "
        "python -c 'import fits_this_torch, torch; print(\"ok\", fits_this_torch.OK, torch.__version__)'"
    )
    code, out, err = run_offline(docker_client, runtime_image, script, wheels)
    assert code == 0, out + err
    assert f"ok True {test_row.torch}" in out


def test_the_override_lifts_the_constraint(docker_client: Any, runtime_image: str, wheels: Path) -> None:
    """docs/images.md's override: with PIP_CONSTRAINT emptied, pip goes on to look for torch 2.10.0 itself (which is
    not among the offline wheels): the refusal above was the constraint's, and only it lifts it."""
    script = 'PIP_CONSTRAINT= pip install --no-index --find-links /wheels needs-other-torch; echo "rc=$?"'
    code, out, err = run_offline(docker_client, runtime_image, script, wheels)
    assert "rc=1" in out and "(constraint)" not in out + err, out + err
    assert f"No matching distribution found for {OTHER_TORCH}" in err, err


def test_uv_reads_the_same_constraints(
    docker_client: Any, runtime_image: str, wheels: Path, test_row: Any
) -> None:
    from envcheck.images.build import UV_VERSION, wheelhouse_image

    uv = _wheel_from_wheelhouse(
        docker_client, wheelhouse_image(test_row), UV_WHEEL.format(UV_VERSION), wheels
    )
    if uv is None:
        pytest.skip(f"no uv wheel in {wheelhouse_image(test_row)} (make wheelhouse)")
    script = (
        f"pip install -q --no-index /wheels/{uv.name} && "
        "uv pip install --python /opt/venv/bin/python --offline --no-index --find-links /wheels "
        'needs-other-torch; echo "uv rc=$?"; '
        "uv pip install --python /opt/venv/bin/python --offline --no-index --find-links /wheels fits-this-torch;"
        ' echo "uv fits rc=$?"'
    )
    code, out, err = run_offline(docker_client, runtime_image, script, wheels)
    assert "uv rc=1" in out and "uv fits rc=0" in out, out + err
    assert "No solution found when resolving dependencies" in err, err
    assert f"needs-other-torch depend on {OTHER_TORCH} and torch=={test_row.torch}" in " ".join(
        err.split()
    ), err


def test_the_devel_image_pins_its_nvcc_too(docker_client: Any, devel_image: str) -> None:
    """devel's nvcc wheels installed under the runtime's constraints, then joined them (docker/Dockerfile)."""
    code, out, err = run_streams(docker_client, devel_image, ["sh", "-c", "cat $PIP_CONSTRAINT; pip check"])
    assert code == 0, out + err
    assert "nvidia-cuda-nvcc==" in out and "torch==" in out and "No broken requirements found" in out
