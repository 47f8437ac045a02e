"""The checks of the torch-free node path (`--for prolog|health|npd`): those with a `node_order`, from the three
domains that hold them. A Slurm prolog runs before every job, so it imports these and not the torch path's checks
(numerics, compile, libraries, ...): envcheck.checks.check_registry lists every check, these among them (a test holds the
two to the same node checks)."""

from __future__ import annotations

import functools

from envcheck.checks import dcgm, gpu_health, node
from envcheck.core.check import CheckSpec

_MODULES = (gpu_health.CHECKS, dcgm.CHECKS, node.CHECKS)


@functools.cache
def node_path_checks() -> dict[str, CheckSpec]:
    """The node path's checks by public name, in their node order."""
    specs = [spec for checks in _MODULES for spec in checks if spec.node_order is not None]
    return {spec.name: spec for spec in sorted(specs, key=lambda s: s.node_order or 0)}
