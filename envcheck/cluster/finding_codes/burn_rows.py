"""The finding-code rows of the burn-in (`envcheck burn`) and of the fleet's comparison of burns."""

from __future__ import annotations

from envcheck.burn import corruption, outcome, stragglers
from envcheck.cluster.finding_codes.common_fixes import IMAGE, NODE
from envcheck.cluster.fleet.checksums import CHECKSUM_CODE
from envcheck.core.findings import Code

ROWS = [
    Code(
        corruption.SDC,
        "a device computed wrong bits: its results differ from its peers' of the same model, or from its own "
        "repeats of the same inputs (silent data corruption)",
        NODE,
        outcome.GPU_SDC_FIX.replace("{i}", "<i>"),
    ),
    Code(
        corruption.UNRESOLVED,
        "two devices of one model disagree bit for bit (or one gave two results for the same inputs), and neither "
        "the repeats nor the float64 reference says which is wrong",
        NODE,
        outcome.UNRESOLVED_FIX,
    ),
    Code(
        corruption.INACCURATE,
        "every device of a model agrees, but outside tolerance of the float64 reference: the software's arithmetic",
        IMAGE,
        outcome.INACCURATE_FIX,
    ),
    Code(
        stragglers.STRAGGLER,
        "a device slower than its peers over the burn, slower at its end under sustained load (with the reason its "
        "clocks give), or below the fleet's baseline",
        NODE,
        outcome.STRAGGLER_FIX.replace("{i}", "<i>"),
    ),
    Code(
        stragglers.FLEET_FAR,
        "a device far below the fleet's baseline for its model (burn --far): it slows every job it joins",
        NODE,
        outcome.STRAGGLER_FIX.replace("{i}", "<i>"),
    ),
    Code(
        CHECKSUM_CODE,
        "a node whose burn checksum of a workload differs from the one most nodes of its GPU model and software "
        "stack agree on: it computed wrong bits",
        NODE,
        "drain the node and burn it again (envcheck burn); dcgmi diag -r 4; replace the GPU that its burn names",
    ),
]
