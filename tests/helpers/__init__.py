"""Helpers of the test suite, one module per job (the names most tests use are importable from here):
`checks` runs a check through the real engine, `cli` runs the CLI and reads its report, `processes` finds and
cleans up process trees, `containers` runs commands in images (tests/images), `image_fixtures` builds the images the Docker tests share, `slurm` holds the single-node Slurm
cluster (tests/cluster), `rank_faults` injects faults into collective ranks. The staged GPU node, with its libcuda
and the one NVML fake, is tests/staging."""

from __future__ import annotations

from tests.helpers.checks import make_context, no_gpu_env, run_check, run_spec
from tests.helpers.cli import HEALTHY_H100, ROOT, load_report, request_of, run_cli
from tests.helpers.processes import (
    descendants,
    kill_leftovers,
    processes_with_marker,
    sigint_default,
    wait_for,
)

__all__ = [
    "HEALTHY_H100",
    "ROOT",
    "descendants",
    "kill_leftovers",
    "load_report",
    "make_context",
    "no_gpu_env",
    "processes_with_marker",
    "request_of",
    "run_check",
    "run_cli",
    "run_spec",
    "sigint_default",
    "wait_for",
]
