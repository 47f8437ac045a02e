"""The files one publish leaves in its state folder: staged.json (stage), verified.json (verify)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from envcheck.core.errors import UsageError
from envcheck.images.publish_plan import PublishPlan, check_digest, check_repository

STAGED = "staged.json"
VERIFIED = "verified.json"
REFUSED = 1  # exit code: the gate refused (unverified, failed or changed image); nothing was promoted


@dataclass(frozen=True)
class Staged:
    """What stage pushed: the repository, the digest the registry gave, the tags promote will point at it."""

    repository: str
    digest: str
    staging_tag: str
    public_tags: tuple[str, ...]
    local_image: str

    @property
    def ref(self) -> str:
        """`repository@digest`: the one reference verify pulls and promote copies."""
        return f"{self.repository}@{self.digest}"

    @classmethod
    def from_plan(cls, plan: PublishPlan, digest: str) -> Staged:
        """The record of `plan` staged at `digest`."""
        return cls(
            plan.repository, check_digest(digest), plan.staging_tag, plan.public_tags, plan.local_image
        )


def write_json(path: Path, doc: dict[str, Any]) -> None:
    """Write atomically (a reader never sees half a record)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def read_json(path: Path, missing: str) -> dict[str, Any]:
    """A record; `missing` is the one-line fix when it is absent or unreadable."""
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"{path} does not exist; {missing}") from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path} is not a readable JSON record ({exc}); {missing}") from None
    if not isinstance(doc, dict):
        raise UsageError(f"{path} is not a JSON object; {missing}")
    return doc


def save_staged(state: Path, staged: Staged) -> Path:
    """Write staged.json; its path."""
    path = state / STAGED
    write_json(path, {**asdict(staged), "public_tags": list(staged.public_tags), "ref": staged.ref})
    (state / "ref").write_text(staged.ref + "\n")  # for shell steps: "$(cat DIR/ref)"
    return path


def load_staged(state: Path) -> Staged:
    """Read staged.json back, validated."""
    doc = read_json(state / STAGED, "run `make publish-stage` (envcheck image publish stage) first")
    try:
        tags = tuple(str(t) for t in doc["public_tags"])
        return Staged(
            check_repository(str(doc["repository"])),
            check_digest(str(doc["digest"])),
            str(doc["staging_tag"]),
            tags,
            str(doc.get("local_image", "")),
        )
    except (KeyError, TypeError):
        raise UsageError(
            f"{state / STAGED} lacks repository, digest, staging_tag or public_tags; stage again"
        ) from None
