"""What a publish moves and where: the staging tag, the public tags (envcheck's own tag rules), the image refs."""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass

from envcheck.core.errors import UsageError
from envcheck.images.matrix import Matrix

# A repository reference: host[:port]/path (lower case, Docker's grammar, no tag or digest).
_REPOSITORY = re.compile(r"[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)+")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


@dataclass(frozen=True)
class PublishPlan:
    """One (row, target) on its way from a local image to a registry's public tags."""

    row: str
    target: str
    local_image: str
    repository: str
    staging_tag: str
    public_tags: tuple[str, ...]

    @property
    def staging_ref(self) -> str:
        """The staging tag's full reference."""
        return f"{self.repository}:{self.staging_tag}"

    def pinned(self, digest: str) -> str:
        """`repository@digest`."""
        return f"{self.repository}@{check_digest(digest)}"

    def describe(self) -> list[str]:
        """The dry-run lines: what would be pushed, verified and tagged, and where."""
        lines = [
            f"stage:   push {self.local_image} -> {self.staging_ref} (the digest the registry gives is recorded)",
            f"verify:  docker pull {self.repository}@<staged digest>; envcheck inside that digest",
            f"promote: copy the manifest {self.repository}@<verified digest> (registry-side) to:",
        ]
        lines += [f"           {self.repository}:{tag}" for tag in self.public_tags]
        return lines


def check_repository(repository: str) -> str:
    """A registry repository such as ghcr.io/org/envcheck or 127.0.0.1:5000/envcheck, else a usage error."""
    if not _REPOSITORY.fullmatch(repository):
        raise UsageError(
            f"registry {repository!r} is not a repository reference such as ghcr.io/org/envcheck "
            "(lower case host/path, no tag or digest)"
        )
    return repository


def check_digest(digest: str) -> str:
    """`sha256:<64 hex>`, else a usage error."""
    if not _DIGEST.fullmatch(digest):
        raise UsageError(f"{digest!r} is not a sha256 digest (sha256:<64 hex digits>)")
    return digest


def dated_tag(first_tag: str, day: datetime.date) -> str:
    """The never-moved copy of the full tag: `<full tag>-YYYYMMDD`."""
    return f"{first_tag}-{day:%Y%m%d}"


def make_plan(
    matrix: Matrix,
    row_id: str,
    target: str,
    repository: str,
    *,
    local_image: str | None = None,
    repo: str = "envcheck",
    day: datetime.date | None = None,
    platform: str | None = None,
) -> PublishPlan:
    """The plan for one matrix row and target (tags from Row.tags plus the dated copy of the full tag). `platform`:
    one platform's leg of a multi-platform row, staged under `staging-<row>-<target>-<arch>` for the merge."""
    row = matrix.row(row_id)
    if platform is not None and platform not in row.platforms:
        raise UsageError(
            f"row {row.id} is not built for {platform}; its platforms: {', '.join(row.platforms)}"
        )
    suffix = f"-{platform.split('/', 1)[-1]}" if platform else ""
    tags = row.tags(target)
    day = day or datetime.datetime.now(datetime.timezone.utc).date()
    return PublishPlan(
        row=row.id,
        target=target,
        local_image=local_image or f"{repo}:{tags[0]}",
        repository=check_repository(repository),
        staging_tag=f"staging-{row.id}-{target}{suffix}",
        public_tags=(*tags, dated_tag(tags[0], day)),
    )
