"""The explicit check registry: every check module is listed here, in report order.

To add a domain, write `envcheck/checks/<domain>.py` exposing `CHECKS: tuple[CheckSpec, ...]`
and add it to `_MODULES`. Nothing is discovered by import-time magic. The training step's numerics are a room of their
own beside this one (envcheck/numerics, against envcheck/reference), registered here like any domain.

A module of its own, not the package's `__init__`: what runs checks imports it, while a module that needs one check's
codes (the cluster policies, the front door) imports that check alone. The node path's checks are listed in
envcheck.checks.node_path_registry, which imports no torch-path check.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

from envcheck import numerics
from envcheck.checks import (
    build,
    container,
    cuda,
    cudnn,
    dcgm,
    dist,
    gpu_health,
    image,
    libraries,
    linalg,
    network,
    node,
    numpy_interop,
    perf,
    runtime,
    torch_compile,
    vision,
    vision_decoders,
)
from envcheck.checks.dcgm import dcgm_sources
from envcheck.checks.gpu_health import host_sources
from envcheck.checks.node import node_sources
from envcheck.core.check import CheckSpec
from envcheck.core.evidence import Source
from envcheck.core.section import Section

_MODULES: Sequence[Sequence[CheckSpec]] = (
    cuda.CHECKS,
    gpu_health.CHECKS,
    dcgm.CHECKS,
    node.CHECKS,
    cudnn.CHECKS,
    libraries.CHECKS,
    build.CHECKS,
    linalg.CHECKS,
    numpy_interop.CHECKS,
    vision.CHECKS,
    vision_decoders.CHECKS,
    container.CHECKS,
    runtime.CHECKS,
    network.CHECKS,
    numerics.CHECKS,
    torch_compile.CHECKS,
    perf.CHECKS,
    # The ranks dist.* spawns need each GPU to themselves: run them from a worker of their own, which holds no
    # CUDA context (the torch group's worker holds one on every GPU once cuda.* has run); the runner never
    # overlaps GPU groups, and closes each one's worker before the next starts.
    tuple(dataclasses.replace(spec, group="distributed") for spec in dist.CHECKS),
    image.CHECKS,
)


# Every replayable bundle section, in report order (envcheck.core.section): `envcheck facts --bundle` captures
# each one, `envcheck explain` replays each one present.
SECTIONS: tuple[Section, ...] = (
    cuda.SECTION,
    gpu_health.SECTION,
    libraries.SECTION,
    network.SECTION,
)


# Every source the node path reads, declared beside the checks that read it (envcheck.core.evidence): the evidence
# map (docs/reference/evidence.md) is rendered from these.
EVIDENCE: tuple[Source, ...] = (*host_sources.EVIDENCE, *node_sources.EVIDENCE, *dcgm_sources.EVIDENCE)


@functools.cache
def registry() -> dict[str, CheckSpec]:
    """All checks by public name, in report order. Duplicate names are a programming error."""
    table: dict[str, CheckSpec] = {}
    for checks in _MODULES:
        for spec in checks:
            if spec.name in table:
                raise RuntimeError(f"duplicate check name {spec.name}")
            table[spec.name] = spec
    return table
