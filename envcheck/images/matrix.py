"""The version matrix: load, validate, tag, and export for CI. No docker here.

The matrix ships inside the package (envcheck/images/matrix.toml, package data), so an installed envcheck knows every
row without a clone; docker/matrix.toml in a clone is a link to that one file.
"""

from __future__ import annotations

import os
import stat
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from envcheck.core.errors import UsageError
from envcheck.images import matrix_rules as rules

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

ROW_FIELDS = (
    "id",
    "torch",
    "torchvision",
    "torchaudio",
    "cuda",
    "index_url",
    "latest",
    "python",
    "base_image",
    "targets",
    "platforms",
)
DEFAULT_FIELDS = ("python", "base_image", "targets", "platforms")
REQUIRED = ("id", "torch", "torchvision", "cuda", "index_url", "python", "base_image", "targets")
# Each runner the workflow builds a platform on (GitHub's hosted runners; arm64 natively, no emulation).
RUNNERS = {rules.AMD64: "ubuntu-24.04", rules.ARM64: "ubuntu-24.04-arm"}


@dataclass(frozen=True)
class Row:
    """One image version: a torch/torchvision/torchaudio triple on one CUDA flavour."""

    id: str
    torch: str
    torchvision: str
    torchaudio: str
    cuda: str
    index_url: str
    python: str
    base_image: str
    targets: tuple[str, ...]
    latest: bool = False
    platforms: tuple[str, ...] = (rules.AMD64,)
    newest_cuda_of_minor: bool = field(default=False, compare=False)

    @property
    def torch_minor(self) -> str:
        """`2.9.1` -> `2.9`."""
        return ".".join(self.torch.split(".")[:2])

    @property
    def arch_list(self) -> list[str] | None:
        """The GPU archs this row's torch wheels carry (sm_XY SASS, compute_XY PTX), or None when not on record."""
        known = rules.WHEEL_ARCH_LISTS.get(self.cuda)
        return rules.arch_list(known) if known else None

    def tags(self, target: str) -> list[str]:
        """Full tag first, then the aliases this row owns."""
        if target not in self.targets:
            raise UsageError(f"row {self.id} has no target {target!r}; it builds {', '.join(self.targets)}")
        tags = [f"{self.torch}-cuda{self.cuda}-{target}", f"{self.torch_minor}-cuda{self.cuda}-{target}"]
        if self.newest_cuda_of_minor:
            tags.append(f"{self.torch_minor}-{target}")
        if self.latest:
            tags.append(f"latest-{target}")
        return tags

    def build_args(self, target: str) -> dict[str, str]:
        """The Dockerfile build arguments for this row (target is accepted for symmetry)."""
        self.tags(target)  # validates the target
        return {
            "TORCH_VERSION": self.torch,
            "TORCHVISION_VERSION": self.torchvision,
            "TORCHAUDIO_VERSION": self.torchaudio,
            "CUDA_VERSION": self.cuda,
            "TORCH_INDEX_URL": self.index_url,
            "PYTHON_VERSION": self.python,
            "BASE_IMAGE": self.base_image,
        }


@dataclass(frozen=True)
class Matrix:
    """All rows of one matrix file, validated."""

    path: Path
    rows: tuple[Row, ...]

    def row(self, row_id: str) -> Row:
        """The row with this id; a usage error listing valid ids otherwise."""
        for row in self.rows:
            if row.id == row_id:
                return row
        raise UsageError(f"{self.path}: no row {row_id!r}; rows: {', '.join(r.id for r in self.rows)}")


SHIPPED = Path(__file__).with_name("matrix.toml")  # package data; docker/matrix.toml links here


def default_matrix_path() -> Path:
    """ENVCHECK_MATRIX, else the matrix this envcheck ships (the same file as a clone's docker/matrix.toml)."""
    env = os.environ.get("ENVCHECK_MATRIX")
    return Path(env) if env else SHIPPED


MAX_MATRIX_BYTES = 1 << 20  # the committed matrix is a few KiB


def _read_regular(path: Path, limit: int) -> str:
    """A regular file's text, at most `limit` bytes (a FIFO would block, /dev/zero never ends)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # O_NONBLOCK: opening a FIFO does not wait for a writer
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UsageError(f"{path}: not a regular file; give the path of a matrix.toml")
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise UsageError(f"{path}: larger than {limit // 1024} KiB; a matrix file is a few KiB")
    return data.decode("utf-8")


def load_matrix(path: Path) -> Matrix:
    """Parse and validate a matrix file; any problem is a one-line UsageError naming file, row, field."""
    try:
        data = tomllib.loads(_read_regular(path, MAX_MATRIX_BYTES))
    except FileNotFoundError:
        raise UsageError(
            f"{path}: matrix file not found; pass --matrix PATH or set ENVCHECK_MATRIX"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read the matrix file: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:
        raise UsageError(
            f"{path}: not valid TOML: nested too deeply; a matrix is rows of flat tables"
        ) from None
    where = str(path)
    unknown = sorted(set(data) - {"schema_version", "defaults", "rows"})
    if unknown:
        raise UsageError(
            f"{where}: unknown top-level key(s) {unknown}; expected schema_version, defaults, rows"
        )
    if data.get("schema_version") != 1:
        raise UsageError(f"{where}: field 'schema_version': {data.get('schema_version')!r} is not 1")
    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict):
        raise UsageError(f"{where}: field 'defaults': must be a table")
    for key in sorted(set(defaults) - set(DEFAULT_FIELDS)):
        raise UsageError(f"{where}: defaults: unknown field {key!r}; allowed: {', '.join(DEFAULT_FIELDS)}")
    raw_rows = data.get("rows")
    if not isinstance(raw_rows, list) or not raw_rows or not all(isinstance(r, dict) for r in raw_rows):
        raise UsageError(f"{where}: field 'rows': needs at least one [[rows]] table")
    rows = [_parse_row(where, i, {**defaults, **raw}) for i, raw in enumerate(raw_rows, start=1)]
    _check_across_rows(where, rows)
    return Matrix(path=path, rows=tuple(_mark_minor_aliases(rows)))


def _parse_row(where: str, index: int, raw: dict[str, Any]) -> Row:
    row_id = raw.get("id", "?")
    shown = row_id if isinstance(row_id, str) and row_id.isascii() and row_id.isprintable() else repr(row_id)
    label = f"{where}: row {index} ({shown})"  # one line even when the id itself is the problem

    def bad(name: str, problem: str | None) -> None:
        if problem:
            raise UsageError(f"{label}: field {name!r}: {problem}")

    for key in raw:
        if key not in ROW_FIELDS:
            bad(key, f"unknown field; allowed: {', '.join(ROW_FIELDS)}")
    for key in REQUIRED:
        if key not in raw:
            bad(key, "missing")
    raw.setdefault("torchaudio", "")
    raw.setdefault("latest", False)
    raw.setdefault("platforms", [rules.AMD64])
    bad("id", rules.check_row_id(raw["id"]))
    bad("torch", rules.check_torch(raw["torch"]))
    bad("torchvision", rules.check_torchvision(raw["torchvision"], raw["torch"]))
    bad("torchaudio", rules.check_torchaudio(raw["torchaudio"], raw["torch"]))
    bad("cuda", rules.check_cuda(raw["cuda"]))
    bad("index_url", rules.check_index_url(raw["index_url"], raw["torch"], raw["cuda"]))
    bad("python", rules.check_python(raw["python"]))
    bad("base_image", rules.check_base_image(raw["base_image"]))
    bad("targets", rules.check_targets(raw["targets"]))
    bad("latest", rules.check_latest(raw["latest"]))
    bad("platforms", rules.check_platforms(raw["platforms"], raw["torch"], raw["cuda"], raw["index_url"]))
    return Row(**{**raw, "targets": tuple(raw["targets"]), "platforms": tuple(raw["platforms"])})


def _check_across_rows(where: str, rows: list[Row]) -> None:
    seen_ids: dict[str, int] = {}
    seen_tags: dict[tuple[str, str], int] = {}
    latest: int | None = None
    for index, row in enumerate(rows, start=1):
        label = f"{where}: row {index} ({row.id})"
        if row.id in seen_ids:
            raise UsageError(f"{label}: field 'id': duplicate of row {seen_ids[row.id]}")
        seen_ids[row.id] = index
        key = (row.torch_minor, row.cuda)
        if key in seen_tags:
            raise UsageError(
                f"{label}: field 'cuda': torch {row.torch_minor} on CUDA {row.cuda} is already "
                f"row {seen_tags[key]}; tags would collide"
            )
        seen_tags[key] = index
        if row.latest:
            if latest is not None:
                raise UsageError(f"{label}: field 'latest': row {latest} is already latest; only one may be")
            latest = index


def _mark_minor_aliases(rows: list[Row]) -> list[Row]:
    newest: dict[str, Row] = {}
    for row in rows:
        best = newest.get(row.torch_minor)
        if best is None or rules.version_tuple(row.cuda) > rules.version_tuple(best.cuda):
            newest[row.torch_minor] = row
    return [replace(r, newest_cuda_of_minor=newest[r.torch_minor] is r) for r in rows]


def github_matrix(
    matrix: Matrix, row_id: str | None = None, target: str | None = None, per_platform: bool = False
) -> dict[str, Any]:
    """The `strategy.matrix` JSON for GitHub Actions: one entry per (row, target); `per_platform`: one per (row,
    target, platform), each with its `platform`, `arch` and the `runner` that builds it natively."""
    rows = [matrix.row(row_id)] if row_id else list(matrix.rows)
    include = []
    for row in rows:
        for tgt in row.targets:
            if target and tgt != target:
                continue
            include.append(
                {
                    "row": row.id,
                    "target": tgt,
                    "torch": row.torch,
                    "cuda": row.cuda,
                    "python": row.python,
                    "tags": ",".join(row.tags(tgt)),
                    "build_args": "\n".join(f"{k}={v}" for k, v in row.build_args(tgt).items()),
                    "platforms": ",".join(row.platforms),
                }
            )
            if per_platform:
                entry = include.pop()
                include += [
                    {**entry, "platform": p, "arch": p.split("/", 1)[1], "runner": RUNNERS[p]}
                    for p in row.platforms
                ]
    if not include:
        raise UsageError(f"{matrix.path}: no (row, target) matches --row {row_id} --target {target}")
    return {"include": include}
