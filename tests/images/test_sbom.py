"""What each image holds, machine-readable: `envcheck image sbom` makes an SPDX SBOM with syft (real, offline) from the
image's own dpkg and Python metadata, and the docs' contents table is made from those SBOMs and the built images.
Docker-marked tests read real images; the others check the committed records against the matrix and the summary and
size code on documents and tars made here."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from pathlib import Path

import pytest

from envcheck.images.contents import compressed_size, load_records, render
from envcheck.images.matrix import default_matrix_path, load_matrix
from envcheck.images.sbom import summarize
from tests.helpers import ROOT, run_cli

RECORDS = ROOT / "docs" / "reference" / "contents.json"


def spdx(*packages: tuple[str, str, str]) -> dict:
    return {
        "spdxVersion": "SPDX-2.3",
        "creationInfo": {"creators": ["Organization: Anchore, Inc", "Tool: syft-1.18.1"]},
        "packages": [
            {
                "name": n,
                "versionInfo": v,
                "externalRefs": [{"referenceType": "purl", "referenceLocator": f"pkg:{kind}/{n}@{v}"}],
            }
            for kind, n, v in packages
        ],
    }


def test_the_summary_counts_each_ecosystem_and_names_the_key_versions() -> None:
    doc = spdx(
        ("pypi", "torch", "2.14.1"), ("pypi", "rich", "14.0"), ("deb", "libc6", "2.36"), ("npm", "x", "1")
    )
    got = summarize(doc)
    assert got["packages"] == {"deb": 1, "pypi": 2} and got["versions"] == {
        "libc6": "2.36",
        "torch": "2.14.1",
    }
    assert got["format"] == "SPDX-2.3" and got["generator"] == "syft-1.18.1"


def test_compressed_size_is_each_layer_gzipped(tmp_path: Path) -> None:
    """A `docker save` stream of two layers: the sum of each layer's gzip size, not the tar's size."""
    layers = {"a/layer.tar": b"x" * 100_000, "b/layer.tar": bytes(range(256)) * 400}
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in {**layers, "manifest.json": b"[]"}.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    buf.seek(0)
    want = sum(len(gzip.compress(d, compresslevel=6, mtime=0)) for d in layers.values())
    assert abs(compressed_size(buf) - want) <= 40  # gzip headers differ by a few bytes between writers


def test_the_committed_records_are_images_of_the_matrix_rows_they_name() -> None:
    """Each record's SBOM names the torch its row pins; the rendered table lists every row with its platforms."""
    rows = {r.id: r for r in load_matrix(default_matrix_path()).rows}
    records = load_records(RECORDS)
    for rec in records:
        row = rows[rec["row"]]
        assert rec["sbom"]["versions"]["torch"].split("+")[0] == row.torch, rec["image"]
        assert rec["platform"] in row.platforms and 0 < rec["compressed_bytes"] < rec["unpacked_bytes"]
        assert rec["sbom"]["packages"]["pypi"] > 20 and rec["sbom"]["packages"]["deb"] > 50
    page = render(list(rows.values()), records)
    assert all(f"`{r}`" in page for r in rows) and "amd64, arm64" in page


@pytest.mark.docker
@pytest.mark.slow
def test_the_sbom_of_a_built_image_lists_its_torch_and_debian_packages(
    runtime_image: str, tmp_path: Path
) -> None:
    out = tmp_path / "runtime.spdx.json"
    done = run_cli("image", "sbom", runtime_image, "--out", str(out), timeout=900)
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    summary = summarize(doc)
    torch = runtime_image.split(":", 1)[1].split("-cuda", 1)[0]
    assert summary["versions"]["torch"].split("+")[0] == torch and "torch-envcheck" in summary["versions"]
    assert summary["packages"]["deb"] > 100 and summary["packages"]["pypi"] > 20
    assert doc["spdxVersion"] == "SPDX-2.3" and "SPDX-2.3 by syft" in done.stdout


@pytest.mark.docker
def test_a_missing_image_is_one_line(tmp_path: Path) -> None:
    done = run_cli(
        "image", "sbom", "envcheck-no-such-image:0", "--out", str(tmp_path / "x.json"), timeout=300
    )
    assert done.returncode != 0 and done.stderr.count("\n") == 1 and "syft could not read" in done.stderr
    assert not (tmp_path / "x.json").exists()
