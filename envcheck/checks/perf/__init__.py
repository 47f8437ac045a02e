"""perf.*: performance judged inside the node, relative to its own best GPU (no SKU table, no absolute floor).

The measurement and the pure verdict are the bench's (envcheck.perf.per_device, envcheck.perf.relative), so
`envcheck run --level full` and `envcheck bench` judge a node with the same units and the same rule.
"""

from __future__ import annotations

from envcheck.core.check import CheckSpec, Level, Needs
from envcheck.perf.per_device import relative_check

CHECKS: tuple[CheckSpec, ...] = (
    CheckSpec(
        "perf.relative",
        relative_check,
        "each GPU's matmul (bf16, TF32), HBM, H2D and D2H copies and each pair's peer copy within --perf-margin "
        "(10%) of the node's best",
        level=Level.FULL,
        needs=Needs(torch=True, cuda=True),
        timeout_s=300.0,
    ),
)
