"""`--for`'s modes and the health mode's streak defaults: what the command line offers, apart from what each mode
does (policy.py: the exit codes; streaks.py: the counts), so that the parser is built without the finding codes those
two import from the checks."""

from __future__ import annotations

import enum

DRAIN_AFTER = 3  # Kubernetes probes' failureThreshold default; Penguin's health checks call it fail_streak
RESUME_AFTER = 2  # one clean run after a drain is no more evidence than one failing run before it


class ModeName(str, enum.Enum):
    """`--for`'s value: who reads the exit code (what the mode does around a run: envcheck.app.cluster_mode.Mode)."""

    PROLOG = "prolog"  # also the Epilog
    PREFLIGHT = "preflight"
    NPD = "npd"
    HEALTH = "health"  # Slurm's HealthCheckProgram: drains and resumes the node itself (cluster.slurm_node)
