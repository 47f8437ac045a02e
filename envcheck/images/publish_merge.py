"""One tag for every platform of a row: the per-platform images, each staged by its own build leg under
`staging-<row>-<target>-<arch>`, joined under the row's staging tag as one multi-platform index, then checked per
platform (each platform is in the index, with the digest its leg staged and CPU-verified). The index digest becomes
staged.json, so verify and promote go on as for a single-platform image (promote copies the index whole).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from envcheck.core.errors import FatalError, UsageError
from envcheck.images import skopeo
from envcheck.images.matrix import Row
from envcheck.images.publish_plan import PublishPlan
from envcheck.images.publish_state import Staged, load_staged, save_staged
from envcheck.images.skopeo import REGISTRY_FAILED


def index_platforms(index: Mapping[str, Any]) -> dict[str, str]:
    """platform (os/arch) -> digest of each image an OCI index or Docker manifest list names; attestation manifests
    (platform unknown/unknown) are left out."""
    out: dict[str, str] = {}
    for entry in index.get("manifests") or []:
        platform = entry.get("platform") or {}
        name = f"{platform.get('os')}/{platform.get('architecture')}"
        if name != "unknown/unknown" and isinstance(entry.get("digest"), str):
            out[name] = entry["digest"]
    return out


def index_problems(index: Mapping[str, Any], expected: Mapping[str, str]) -> list[str]:
    """Why an index is not the join of the expected (platform -> digest) images; [] when it is."""
    if "manifests" not in index:
        return ["the staging tag is a single image, not a multi-platform index"]
    found = index_platforms(index)
    problems = [f"{p}: missing from the index" for p in expected if p not in found]
    problems += [
        f"{p}: the index names {found[p]}, but {digest} was staged and verified"
        for p, digest in expected.items()
        if p in found and found[p] != digest
    ]
    problems += [f"{p}: in the index but not a platform of this row" for p in found if p not in expected]
    return problems


def parts_of(row: Row, given: Mapping[str, Path]) -> dict[str, Staged]:
    """Each platform's staged record; every platform of the row, and no other, must be given."""
    if set(given) != set(row.platforms):
        raise UsageError(
            f"row {row.id} is built for {', '.join(row.platforms)}; --part gave {', '.join(sorted(given)) or 'none'}"
        )
    return {platform: load_staged(state) for platform, state in given.items()}


def merge(plan: PublishPlan, parts: Mapping[str, Staged], state: Path) -> Staged:
    """Create the index under the staging tag from the parts' digests, check it per platform, record its digest."""
    from envcheck.images.publish import docker as run_docker

    refs = [part.ref for part in parts.values()]
    run_docker(["buildx", "imagetools", "create", "-t", plan.staging_ref, *refs], "joining the platforms")
    raw = skopeo.raw_manifest(plan.staging_ref)
    if raw is None:
        raise FatalError(f"{plan.staging_ref}: no manifest after imagetools create", REGISTRY_FAILED)
    problems = index_problems(json.loads(raw), {p: s.digest for p, s in parts.items()})
    if problems:
        raise FatalError(f"{plan.staging_ref}: " + "; ".join(problems), REGISTRY_FAILED)
    digest = skopeo.digest_of(plan.staging_ref)
    if digest is None:
        raise FatalError(f"{plan.staging_ref}: the registry gave no digest", REGISTRY_FAILED)
    staged = Staged.from_plan(plan, digest)
    save_staged(state, staged)
    return staged
