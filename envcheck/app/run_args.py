"""The flags of `envcheck run` and the request they become (`RunRequest`): the run flags the torchrun entry shares
(`SharedRunFlags`), selection and the single-node settings, and the cluster flags (`--for`, `--prometheus`, the health
check's streaks); argparse checks every value before any check runs."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from envcheck.app.args import (
    fraction,
    message_size,
    names,
    non_negative_int,
    output_path,
    percent,
    positive_float,
    rank_count,
)
from envcheck.app.requests import Request
from envcheck.cluster import mode_names
from envcheck.cluster.mode_names import ModeName
from envcheck.cluster.node_profiles import profile_arg
from envcheck.core.check import MEMORY_FRACTION, ProfileOptions


@dataclass(frozen=True, kw_only=True)
class SharedRunFlags(Request):
    """The run flags `envcheck run` and the torchrun entry share, declared once (add_shared_run_arguments)."""

    level: str
    allow_cpu: bool
    json: str | None
    junit: str | None
    timeout: float | None
    min_busbw: float | None
    min_busbw_at: int | None
    strict_perf: bool

    def outputs(self) -> dict[str, str | None]:
        """--json and --junit."""
        return {"--json": self.json, "--junit": self.junit}


@dataclass(frozen=True, kw_only=True)
class RunRequest(SharedRunFlags):
    """`envcheck run`: the shared run flags, selection, the single-node settings and the cluster flags."""

    only: str | None
    skip: str | None
    expect_gpus: int | None
    cpu_ranks: int
    profile: ProfileOptions | None
    profile_floors: bool
    memory_fraction: float
    perf_margin: float
    for_mode: str | None
    prometheus: str | None
    drain_after: int | None
    resume_after: int | None

    def outputs(self) -> dict[str, str | None]:
        """--json, --junit and --prometheus."""
        return {**super().outputs(), "--prometheus": self.prometheus}


def add_shared_run_arguments(
    parser: argparse.ArgumentParser,
    *,
    timeout_default: float | None = None,
    timeout_help: str = "cap the whole run",
    check_outputs: bool = True,
) -> None:
    """The run flags `envcheck run` and the torchrun entry (`python -m envcheck.distributed`) share, declared
    once: --level, --allow-cpu, --json, --junit, --timeout, --min-busbw, --min-busbw-at, --strict-perf.

    Where the torchrun entry differs it says so: its `--timeout` is how long a rank may make no progress
    (and the process-group timeout), not a cap on the whole run (`timeout_default`, `timeout_help`); and it
    passes `check_outputs=False`: only rank 0 writes the reports, so the other ranks must not judge the path."""
    parser.add_argument(
        "--level",
        choices=["quick", "full"],
        default="quick",
        help="quick (default) or full (adds the slower checks, e.g. the dist.busbw sweep)",
    )
    parser.add_argument(
        "--allow-cpu",
        action="store_true",
        help="no GPU is fine: GPU checks skip, cuda.available warns, distributed checks use gloo",
    )
    out = output_path if check_outputs else str
    parser.add_argument("--json", type=out, metavar="PATH", help="write JSON ('-' = stdout only)")
    parser.add_argument("--junit", type=out, metavar="PATH", help="write JUnit XML")
    parser.add_argument(
        "--timeout", type=positive_float, default=timeout_default, metavar="SECONDS", help=timeout_help
    )
    parser.add_argument(
        "--min-busbw",
        type=positive_float,
        metavar="GBPS",
        help="warn when all-reduce bus bandwidth is below this",
    )
    parser.add_argument(
        "--min-busbw-at",
        type=message_size,
        metavar="SIZE",
        help="the all-reduce message size the --min-busbw floor was measured at (e.g. 16G, as "
        "nccl-tests' -b/-e): judged only against a sweep row of that size; default: the peak",
    )
    parser.add_argument(
        "--strict-perf", action="store_true", help="make --min-busbw and perf.relative failures, not warnings"
    )


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `envcheck run`: the shared run flags, plus selection and the single-node settings."""
    add_shared_run_arguments(parser)
    parser.add_argument("--only", type=names, metavar="NAMES", help="comma-separated check names to run")
    parser.add_argument(
        "--skip", type=names, metavar="NAMES", help="comma-separated check names to leave out"
    )
    parser.add_argument(
        "--expect-gpus", type=non_negative_int, metavar="N", help="fail unless N GPUs are visible"
    )
    parser.add_argument(
        "--cpu-ranks",
        type=rank_count,
        default=2,
        metavar="N",
        help="gloo ranks for the CPU distributed check (default 2)",
    )
    parser.add_argument(
        "--profile",
        type=profile_arg,
        metavar="FILE|NAME",
        help="what this node type must have (TOML file, or built-in: h100-sxm-8, h200-8, a100-sxm-8, "
        "a100-80gb-sxm-8, l40s, b200-8); --expect-gpus and --min-busbw override its values",
    )
    parser.add_argument(
        "--profile-floors",
        action="store_true",
        help="also apply the profile's absolute performance floors (its busbw floor, at the message "
        "size it states); off by default: perf.relative and envcheck fleet judge without them",
    )
    parser.add_argument(
        "--memory-fraction",
        type=fraction,
        default=MEMORY_FRACTION,
        metavar="F",
        help="fraction of each GPU's memory cuda.devices allocates (default %(default)s)",
    )
    parser.add_argument(
        "--perf-margin",
        type=percent,
        default=10.0,
        metavar="PCT",
        help="perf.relative (--level full): name a GPU or GPU pair more than PCT%% below the node's best "
        "of the same kind (default %(default)g, gpu-fryer's; --strict-perf makes it a failure)",
    )


def textfile_path(text: str) -> str:
    """argparse type: a regular file path (not '-') whose folder exists and is writable, its name short enough
    for the temp file beside it (checked before any work, by the same rule as --json)."""
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        raise argparse.ArgumentTypeError("needs prometheus_client: pip install 'envcheck[cluster]'") from None
    path = Path(text)
    if text in ("", "-") or path.is_dir():
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a file path; give e.g. /var/lib/node_exporter/textfile/envcheck.prom"
        )
    return output_path(text)


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """`--for`, `--prometheus` and the health check's streaks (validated by argparse, before any check runs)."""
    parser.add_argument(
        "--for",
        dest="for_mode",
        choices=[m.value for m in ModeName],
        metavar="MODE",
        help="exit policy for a cluster: prolog (Slurm Prolog/Epilog), health (Slurm HealthCheckProgram: "
        "drains and resumes the node, within 60 s), preflight (Kubernetes), npd "
        "(node-problem-detector); only node faults fail (see docs/cluster.md)",
    )
    parser.add_argument(
        "--prometheus",
        type=textfile_path,
        metavar="FILE",
        help="write a node_exporter textfile (atomically) with each check's status and key figures",
    )
    parser.add_argument(
        "--drain-after",
        type=streak_count,
        metavar="N",
        help=f"--for health: a soft finding (performance) drains after N health runs in a row "
        f"(default {mode_names.DRAIN_AFTER}); a hard one (a lost GPU, ECC, a wedged driver) at once",
    )
    parser.add_argument(
        "--resume-after",
        type=streak_count,
        metavar="M",
        help=f"--for health: a node envcheck drained resumes after M clean runs in a row "
        f"(default {mode_names.RESUME_AFTER})",
    )


def streak_count(text: str) -> int:
    """argparse type for --drain-after/--resume-after: a whole number of runs from 1 to 1000."""
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= 1000:
        raise argparse.ArgumentTypeError(f"{text[:20]!r}: give a whole number of health runs from 1 to 1000")
    return int(text)
