"""The contents table of the docs: for each matrix row and target, what its image holds (from the image's SBOM),
its platforms, and its compressed and unpacked size (from the built image).

A record is made from a built image and its SBOM (`envcheck image sbom IMAGE --record FILE --row R --target T`) and
kept in docs/reference/contents.json; docs/reference/contents.md is rendered from the matrix and those records
(`make docs-reference`), so a row without a record still shows what the matrix pins.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import tarfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from envcheck.core.errors import ExitCode, FatalError, UsageError
from envcheck.images.engine import docker_binary
from envcheck.images.matrix import Row
from envcheck.images.sbom import summarize

CONTENTS_SCHEMA_VERSION = 1


class _Counter:
    """A write-only sink that counts bytes (gzip's output size, without keeping it)."""

    def __init__(self) -> None:
        self.n = 0

    def write(self, data: bytes) -> int:
        self.n += len(data)
        return len(data)

    def flush(self) -> None:
        """Nothing to flush."""


def compressed_size(tar_stream: IO[bytes], known: dict[str, int] | None = None) -> int:
    """The sum of each layer gzip-compressed (level 6, as `docker push` stores them), from a `docker save` stream.
    `known`: sizes by layer entry name from earlier images (the targets of one row share their torch layers), read
    and filled in."""
    total = 0
    known = {} if known is None else known
    with tarfile.open(fileobj=tar_stream, mode="r|") as tar:
        for member in tar:
            if not (
                member.isfile() and (member.name.endswith("layer.tar") or member.name.startswith("blobs/"))
            ):
                continue
            if member.name in known:
                total += known[member.name]
                continue
            src = tar.extractfile(member)
            if src is None:
                continue
            sink = _Counter()
            with gzip.GzipFile(fileobj=sink, mode="wb", mtime=0, compresslevel=6) as gz:
                while chunk := src.read(1 << 20):
                    gz.write(chunk)
            known[member.name] = sink.n
            total += sink.n
    return total


def image_sizes(image: str) -> dict[str, Any]:
    """Unpacked size, platform and compressed size (gzip per layer, as pushed) of a local image."""
    docker = docker_binary()
    fmt = "{{.Size}} {{.Os}}/{{.Architecture}}"
    done = subprocess.run(
        [docker, "image", "inspect", "--format", fmt, image], capture_output=True, text=True, timeout=60
    )
    if done.returncode != 0:
        raise UsageError(f"no local image {image}: build it first (make image ...)")
    size, platform = done.stdout.split()
    cache = Path.home() / ".cache" / "envcheck" / "layer-gzip-sizes.json"  # by `docker save` layer entry
    known = json.loads(cache.read_text()) if cache.is_file() else {}
    with subprocess.Popen([docker, "save", image], stdout=subprocess.PIPE) as save:
        assert save.stdout is not None
        packed = compressed_size(save.stdout, known)
        if save.wait(timeout=1800) != 0:
            raise FatalError(f"docker save {image} failed", ExitCode.FAILED)
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(known))
    return {"unpacked_bytes": int(size), "compressed_bytes": packed, "platform": platform}


def make_record(row: Row, target: str, image: str, sbom: Mapping[str, Any]) -> dict[str, Any]:
    """One image's line of the contents table."""
    row.tags(target)  # validates the target
    return {"row": row.id, "target": target, "image": image, **image_sizes(image), "sbom": summarize(sbom)}


def load_records(path: Path) -> list[dict[str, Any]]:
    """The records kept in `path` ([] when it does not exist yet)."""
    if not path.exists():
        return []
    doc = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(doc, dict) or doc.get("schema_version") != CONTENTS_SCHEMA_VERSION:
        raise UsageError(f"{path}: not a contents file (schema_version {CONTENTS_SCHEMA_VERSION})")
    records: list[dict[str, Any]] = doc["images"]
    return records


def save_record(path: Path, record: Mapping[str, Any]) -> None:
    """Add or replace the record of (row, target, platform) in `path`."""
    key = (record["row"], record["target"], record["platform"])
    kept = [r for r in load_records(path) if (r["row"], r["target"], r["platform"]) != key]
    images = sorted([*kept, dict(record)], key=lambda r: (r["row"], r["target"], r["platform"]))
    doc = {"schema_version": CONTENTS_SCHEMA_VERSION, "images": images}
    path.write_text(json.dumps(doc, indent=2) + "\n")


def _mb(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB"


def render(rows: Sequence[Row], records: Sequence[Mapping[str, Any]]) -> str:
    """The contents page body: the matrix's rows with their platforms, then each built image's SBOM figures."""
    out = [
        "| row | torch | torchvision | CUDA | Python | platforms | targets |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        platforms = ", ".join(p.removeprefix("linux/") for p in r.platforms)
        out.append(
            f"| `{r.id}`{' (latest)' if r.latest else ''} | {r.torch} | {r.torchvision} | {r.cuda} | {r.python} | "
            f"{platforms} | {', '.join(r.targets)} |"
        )
    out += [
        "",
        "### Built images, from their SBOMs",
        "",
        "Each line is one image built and measured (`make image-contents`): the versions its SBOM names, its "
        "packages (Debian's and Python's), its size compressed (each layer gzip-compressed, as a registry stores "
        "it) and unpacked.",
        "",
        "| image | platform | torch | CUDA runtime | cuDNN | NCCL | Python packages | Debian packages | compressed "
        "| unpacked | SBOM |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for rec in records:
        v = rec["sbom"]["versions"]
        cuda = (
            v.get("cuda-toolkit") or v.get("nvidia-cuda-runtime-cu12") or v.get("nvidia-cuda-runtime") or "-"
        )
        cudnn = v.get("nvidia-cudnn-cu13") or v.get("nvidia-cudnn-cu12") or "-"
        nccl = v.get("nvidia-nccl-cu13") or v.get("nvidia-nccl-cu12") or "-"
        pkgs = rec["sbom"]["packages"]
        out.append(
            f"| `{rec['row']}` {rec['target']} | {rec['platform'].removeprefix('linux/')} | {v.get('torch', '-')} | "
            f"{cuda} | {cudnn} | {nccl} | {pkgs.get('pypi', 0)} | {pkgs.get('deb', 0)} | "
            f"{_mb(rec['compressed_bytes'])} | {_mb(rec['unpacked_bytes'])} | {rec['sbom']['format']}, "
            f"{rec['sbom']['generator']} |"
        )
    if not records:
        out.append("| (none recorded yet: `make image-contents`) | | | | | | | | | | |")
    return "\n".join(out) + "\n"
