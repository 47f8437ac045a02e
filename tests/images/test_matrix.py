"""The version matrix: the committed file loads, tags follow the contract, bad rows give one-line errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from envcheck.core.errors import UsageError
from envcheck.images import build as builder
from envcheck.images.matrix import Row, default_matrix_path, github_matrix, load_matrix
from tests.helpers import ROOT

GOOD_ROW = """
[[rows]]
id = "2.9-cu128"
torch = "2.9.1"
torchvision = "0.24.1"
torchaudio = "2.9.1"
cuda = "12.8"
index_url = "https://pypi.org/simple"
"""
HEADER = (
    'schema_version = 1\n[defaults]\npython = "3.11"\nbase_image = "debian:bookworm-slim"\n'
    'targets = ["runtime", "devel"]\n'
)


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "matrix.toml"
    path.write_text(body)
    return path


def error_of(tmp_path: Path, body: str) -> str:
    with pytest.raises(UsageError) as info:
        load_matrix(write(tmp_path, body))
    message = info.value.message
    assert "\n" not in message
    return message


def test_committed_matrix_loads_and_covers_required_versions() -> None:
    matrix = load_matrix(ROOT / "docker" / "matrix.toml")
    minors = {row.torch_minor for row in matrix.rows}
    assert {"2.8", "2.9", "2.10", "2.11", "2.12", "2.13", "2.14"} <= minors
    assert {row.cuda.split(".")[0] for row in matrix.rows} == {"12", "13"}
    assert sum(row.latest for row in matrix.rows) == 1
    assert any(row.index_url == "https://pypi.org/simple" for row in matrix.rows)
    assert default_matrix_path().resolve() == (ROOT / "docker" / "matrix.toml").resolve()


def test_tags_full_then_aliases(tmp_path: Path) -> None:
    second = (
        GOOD_ROW.replace('"2.9-cu128"', '"2.9-cu130"')
        .replace('"12.8"', '"13.0"')
        .replace("https://pypi.org/simple", "https://download.pytorch.org/whl/cu130")
        + "latest = true\n"
    )
    matrix = load_matrix(write(tmp_path, HEADER + GOOD_ROW + second))
    old, new = matrix.rows
    assert old.tags("runtime") == ["2.9.1-cuda12.8-runtime", "2.9-cuda12.8-runtime"]
    assert new.tags("devel") == ["2.9.1-cuda13.0-devel", "2.9-cuda13.0-devel", "2.9-devel", "latest-devel"]
    assert old.build_args("runtime")["TORCH_INDEX_URL"] == "https://pypi.org/simple"
    with pytest.raises(UsageError, match="no target 'ssh'"):
        old.tags("ssh")


def test_github_matrix_has_one_entry_per_row_and_target() -> None:
    matrix = load_matrix(ROOT / "docker" / "matrix.toml")
    include = github_matrix(matrix)["include"]
    assert len(include) == sum(len(r.targets) for r in matrix.rows)
    assert {(e["row"], e["target"]) for e in include} == {(r.id, t) for r in matrix.rows for t in r.targets}
    entry = next(e for e in include if e["row"] == "2.8-cu128" and e["target"] == "runtime")
    assert entry["tags"].split(",")[0] == "2.8.0-cuda12.8-runtime"
    assert "TORCH_VERSION=2.8.0" in entry["build_args"].splitlines()
    assert entry["platforms"] == "linux/amd64"
    latest = next(e for e in include if e["row"] == matrix_latest(matrix).id and e["target"] == "runtime")
    assert latest["platforms"] == "linux/amd64,linux/arm64"
    json.dumps(include)


def matrix_latest(matrix):  # type: ignore[no-untyped-def]
    return next(r for r in matrix.rows if r.latest)


def test_arm64_is_listed_exactly_where_pypi_ships_aarch64_cuda_wheels_of_the_rows_cuda(
    tmp_path: Path,
) -> None:
    """torch 2.11-2.14 from PyPI (aarch64 wheels require cuda-toolkit 13.0.x) carry linux/arm64; the twin, a
    download.pytorch.org row, is amd64 only; a 2.11 row asking arm64 for CUDA 12.8 is refused."""
    matrix = load_matrix(ROOT / "docker" / "matrix.toml")
    arm = {r.id for r in matrix.rows if "linux/arm64" in r.platforms}
    assert arm == {"2.11-cu130", "2.12-cu130", "2.13-cu130", "2.14-cu130"}
    assert all(r.platforms[0] == "linux/amd64" for r in matrix.rows)
    row = GOOD_ROW.replace("2.9", "2.11").replace('"0.24.1"', '"0.26.0"').replace('"2.11.1"', '"2.11.0"')
    row = row.replace('"12.8"', '"13.0"') + 'platforms = ["linux/amd64", "linux/arm64"]\n'
    assert load_matrix(write(tmp_path, HEADER + row)).rows[0].platforms == ("linux/amd64", "linux/arm64")
    cu128 = row.replace('"13.0"', '"12.8"').replace(
        "https://pypi.org/simple", "https://download.pytorch.org/whl/cu128"
    )
    assert "no aarch64 CUDA 12.8 wheels on record" in error_of(tmp_path, HEADER + cu128)


@pytest.mark.parametrize(
    ("change", "field", "finding"),
    [
        (('"0.24.1"', '"0.23.0"'), "torchvision", "does not match torch 2.9.x (expected 0.24.x)"),
        (('torchaudio = "2.9.1"', 'torchaudio = "2.8.0"'), "torchaudio", "expected 2.9.x"),
        (('"12.8"', '"13.0"'), "index_url", "PyPI's torch 2.9.1 wheels are CUDA 12.8"),
        (('"12.8"', '"12"'), "cuda", "not a CUDA version"),
        (('torch = "2.9.1"', 'torch = "2.9"'), "torch", "not an exact version"),
        (("https://pypi.org/simple", "https://download.pytorch.org/whl/cu126"), "index_url", "serves cu126"),
        (("https://pypi.org/simple", "http://example.com/simple"), "index_url", "not an https://"),
        (('id = "2.9-cu128"', 'id = "Bad Id"'), "id", "not a row id"),
        (('cuda = "12.8"', 'cuda = "12.8"\ncolour = "blue"'), "colour", "unknown field"),
        (('cuda = "12.8"\n', ""), "cuda", "missing"),
        (('cuda = "12.8"', 'cuda = "12.8"\ntargets = ["runtime", "gui"]'), "targets", "unknown target"),
        (('cuda = "12.8"', 'cuda = "12.8"\npython = "python3"'), "python", "not a Python version"),
        (('cuda = "12.8"', 'cuda = "12.8"\nlatest = "yes"'), "latest", "not true or false"),
        (('cuda = "12.8"', 'cuda = "12.8"\nplatforms = ["linux/s390x"]'), "platforms", "unknown platform"),
        (
            ('cuda = "12.8"', 'cuda = "12.8"\nplatforms = ["linux/arm64"]'),
            "platforms",
            "linux/amd64 included",
        ),
        # PyPI's aarch64 torch 2.9.1 is a CPU build: no arm64 CUDA image can come from it
        (
            ('cuda = "12.8"', 'cuda = "12.8"\nplatforms = ["linux/amd64", "linux/arm64"]'),
            "platforms",
            "no aarch64 CUDA 12.8 wheels on record for torch 2.9.1",
        ),
    ],
)
def test_malformed_row_names_file_row_and_field(
    tmp_path: Path, change: tuple[str, str], field: str, finding: str
) -> None:
    message = error_of(tmp_path, HEADER + GOOD_ROW.replace(*change))
    assert message.startswith(f"{tmp_path / 'matrix.toml'}: row 1 (")
    assert f"field '{field}'" in message
    assert finding in message


def test_cross_row_errors(tmp_path: Path) -> None:
    assert "field 'id': duplicate of row 1" in error_of(tmp_path, HEADER + GOOD_ROW + GOOD_ROW)
    clash = GOOD_ROW.replace('"2.9-cu128"', '"other"')
    assert "tags would collide" in error_of(tmp_path, HEADER + GOOD_ROW + clash)
    two_latest = GOOD_ROW + "latest = true\n"
    other = (
        two_latest.replace('"2.9-cu128"', '"2.8-cu128"')
        .replace('"2.9.1"', '"2.8.0"')
        .replace('"0.24.1"', '"0.23.0"')
    )
    message = error_of(tmp_path, HEADER + two_latest + other)
    assert "row 2 (2.8-cu128): field 'latest': row 1 is already latest" in message


def test_file_level_errors(tmp_path: Path) -> None:
    assert "field 'schema_version': None is not 1" in error_of(tmp_path, "")
    with pytest.raises(UsageError, match="matrix file not found; pass --matrix"):
        load_matrix(tmp_path / "absent.toml")
    assert "not valid TOML" in error_of(tmp_path, "rows = [")
    assert "field 'schema_version': 2 is not 1" in error_of(tmp_path, HEADER.replace("= 1", "= 2") + GOOD_ROW)
    assert "needs at least one [[rows]]" in error_of(tmp_path, HEADER)


def test_torchvision_cuda_int_form_is_normalised() -> None:
    """Seen in the real torchvision 0.26.0 CUDA wheel: torchvision.version.cuda == 13000 (an int)."""
    from envcheck.checks.vision_pairing import cuda_text

    assert cuda_text(13000) == "13.0" and cuda_text(12080) == "12.8"
    assert cuda_text("12.8") == "12.8" and cuda_text(None) is None


def test_wheelhouse_downloads_the_row_from_its_index_and_envcheck_deps_from_pypi(tmp_path: Path) -> None:
    """Two commands, each with only the arguments it uses (the torch=False variant ignored `extra`)."""
    from envcheck.images import build

    row = load_matrix(ROOT / "docker" / "matrix.toml").rows[0]
    wheels = build.wheelhouse_command(row, tmp_path, ["extra-req==1"])
    deps = build.deps_download_command(row, tmp_path)
    assert f"torch=={row.torch}" in wheels and "extra-req==1" in wheels and row.index_url in wheels
    assert all(d in deps for d in build.ENVCHECK_DEPS) and "https://pypi.org/simple" in deps
    assert not any(a.startswith("torch") for a in deps)


def test_the_images_install_envcheck_with_the_extras_its_documented_modes_need() -> None:
    """The image's deps layer (docker/install-envcheck-deps.sh) and the wheelhouse's list (ENVCHECK_DEPS) are one list,
    and it holds the `nvml` and `cluster` extras: `envcheck run --for npd --prometheus FILE`, which the DaemonSet runs,
    failed with exit 2 ("needs prometheus_client") in an image without the cluster extra."""
    import re

    import tomllib

    from envcheck.images import build

    script = (ROOT / "docker" / "install-envcheck-deps.sh").read_text()
    installed = re.findall(r'"([A-Za-z0-9_.-]+[<>=!~][^"]*)"', script.split("pip install", 1)[1])
    assert installed == build.ENVCHECK_DEPS
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    wanted = (
        [d for d in project["dependencies"] if "python_version" not in d] + extras["nvml"] + extras["cluster"]
    )
    assert sorted(wanted) == sorted(build.ENVCHECK_DEPS)


# The validator must reject what would inject lines into CI or hang the reader.
def test_a_newline_in_index_url_cannot_inject_build_args(tmp_path: Path) -> None:
    evil = (
        GOOD_ROW.replace('"2.9-cu128"', '"2.9-cu130"')
        .replace('"12.8"', '"13.0"')
        .replace(
            '"https://pypi.org/simple"',
            '"https://x.example/cu130\\nBASE_IMAGE=evil:latest\\nx=https://y/cu130"',
        )
    )
    try:
        matrix = load_matrix(write(tmp_path, HEADER + evil))
    except UsageError as exc:
        assert "index_url" in exc.message and "newlines" in exc.message and "\n" not in exc.message
    else:  # today's code: CI's build_args gain a BASE_IMAGE line the matrix never declared as such
        lines = github_matrix(matrix)["include"][0]["build_args"].splitlines()
        pytest.fail(f"accepted, and build_args now has {len(lines)} lines: {lines}")


@pytest.mark.parametrize(
    "field, value",
    [
        ("id", '"2.9-cu128\\n"'),
        ("python", '"3.11\\n"'),
        ("python", '"3.1\u0661"'),
        ("base_image", '"debian:bookworm-slim\\n"'),
        ("index_url", '"https://pypi.org/simple\\n"'),
        ("torch", '"2.9.\u0661"'),
        ("cuda", '"12.\u0668"'),
    ],
)
def test_trailing_newlines_and_non_ascii_digits_are_rejected(tmp_path: Path, field: str, value: str) -> None:
    row = (
        GOOD_ROW.replace("[[rows]]\n", f"[[rows]]\n{field} = {value}\n")
        if field in ("python", "base_image")
        else "\n".join(
            f"{field} = {value}" if line.startswith(f"{field} =") else line for line in GOOD_ROW.splitlines()
        )
    )
    assert f"field {field!r}" in error_of(tmp_path, HEADER + row)


def test_deeply_nested_toml_is_one_line(tmp_path: Path) -> None:
    assert "nested too deeply" in error_of(tmp_path, HEADER + "x = " + "[" * 20000 + "]" * 20000 + "\n")


@pytest.mark.parametrize("name", ["fifo", "/dev/zero"])
def test_only_regular_files_are_read(tmp_path: Path, name: str) -> None:
    import os
    import threading

    path = Path(name) if name.startswith("/") else tmp_path / name
    if not path.exists():
        os.mkfifo(path)
    outcome: list[BaseException] = []

    def load() -> None:
        try:
            load_matrix(path)
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=load, daemon=True)  # today: a FIFO blocks, /dev/zero reads without end
    worker.start()
    worker.join(20)
    assert not worker.is_alive(), f"load_matrix({path}) hangs"
    assert isinstance(outcome[0], UsageError) and "not a regular file" in outcome[0].message


def test_the_matrix_file_has_a_size_limit(tmp_path: Path) -> None:
    big = write(tmp_path, HEADER + "#" * (2 << 20) + "\n" + GOOD_ROW)
    with pytest.raises(UsageError, match="larger than"):
        load_matrix(big)


def test_a_given_build_date_is_the_labels_and_none_is_the_builds_own_time(test_row: Row) -> None:
    """One date for every build of a test session (two streams build the same images: the second is a cache hit,
    the same image, not a re-tag); without one, the time of the build."""

    def date_arg(req: builder.BuildRequest) -> str:
        cmd = builder.build_command(req, docker="docker")
        (arg,) = [c for c in cmd if c.startswith("BUILD_DATE=")]
        return arg.split("=", 1)[1]

    fixed = builder.BuildRequest(row=test_row, target="runtime", build_date="2026-11-30T06:00:00Z")
    assert date_arg(fixed) == "2026-11-30T06:00:00Z"
    now = date_arg(builder.BuildRequest(row=test_row, target="runtime"))
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", now) and now != "2026-11-30T06:00:00Z"
