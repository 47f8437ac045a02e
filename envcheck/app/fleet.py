"""`envcheck fleet`: read many nodes' reports, learn each metric's baseline per GPU model and count, list the
outlier nodes and GPUs (text, --json, --html) and write the baseline (--write-baseline) a profile can hold."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from envcheck.app.args import non_negative_float, output_path, percent
from envcheck.app.output import raise_failures, write_reports
from envcheck.app.requests import Handler, Request
from envcheck.core.errors import UsageError

if TYPE_CHECKING:
    from envcheck.cluster.fleet.baseline_file import Stored

MAX_BASELINE_BYTES = 4 << 20


def _count(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or not 2 <= int(text) <= 100000:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number of nodes from 2 up (e.g. 3)")
    return int(text)


@dataclass(frozen=True, kw_only=True)
class FleetRequest(Request):
    """`envcheck fleet`'s arguments."""

    reports: tuple[str, ...]
    json: str | None
    html: str | None
    write_baseline: str | None
    baseline: str | None
    margin: float
    z: float
    min_nodes: int

    def outputs(self) -> dict[str, str | None]:
        """--json."""
        return {"--json": self.json}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `fleet` subcommand."""
    p = sub.add_parser(
        "fleet",
        help="learn baselines from many nodes' JSON reports; list the outlier nodes and GPUs",
        description="Group nodes by GPU model and count, learn each metric's median and MAD, and name "
        "the nodes and GPUs outside them (docs/cluster.md: Fleet baselines).",
    )
    p.add_argument(
        "reports",
        nargs="*",
        metavar="REPORT|DIR|-",
        help="envcheck run --json or bench --json reports: files, folders of *.json, or - for stdin",
    )
    p.add_argument("--json", type=output_path, metavar="PATH|-", help="write the JSON verdict (- for stdout)")
    p.add_argument(
        "--html", type=output_path, metavar="PATH", help="write a self-contained HTML page with the plots"
    )
    p.add_argument(
        "--write-baseline",
        type=output_path,
        metavar="PATH",
        help="write the learned baseline as a TOML [baseline] table (a profile can hold it)",
    )
    p.add_argument(
        "--baseline",
        metavar="FILE|PROFILE",
        help="judge against a stored baseline (a --write-baseline file, or a profile holding one)",
    )
    p.add_argument(
        "--margin",
        type=percent,
        default=5.0,
        metavar="PCT",
        help="an outlier is worse than the median by more than PCT%% (default 5, SuperBench's rule) ...",
    )
    p.add_argument(
        "--z",
        type=non_negative_float,
        default=3.5,
        metavar="Z",
        help="... and by a modified z-score above Z (default 3.5, Iglewicz and Hoaglin)",
    )
    p.add_argument(
        "--min-nodes",
        type=_count,
        default=3,
        metavar="N",
        help="learn a metric's baseline only from N or more nodes (default 3)",
    )
    p.set_defaults(handler=Handler(FleetRequest, fleet_main))


def stored_baseline(spec: str) -> tuple[str, Stored]:
    """A stored baseline from a file or a built-in profile's name (`envcheck fleet --baseline`, `envcheck burn
    --baseline`); a UsageError naming what is wrong with it."""
    from envcheck.cluster.fleet.baseline_file import parse
    from envcheck.cluster.fleet.sources import FleetInputError
    from envcheck.cluster.node_profiles import BUILT_IN

    path = BUILT_IN / f"{spec}.toml" if (BUILT_IN / f"{spec}.toml").is_file() and "/" not in spec else None
    target = str(path) if path is not None else spec
    try:
        with open(target, "rb") as f:
            if not f.seekable():
                raise UsageError(f"--baseline {spec}: not a regular file; give a baseline TOML file")
            raw = f.read(MAX_BASELINE_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"--baseline {spec}: cannot read it ({exc.strerror})") from None
    if len(raw) > MAX_BASELINE_BYTES:
        raise UsageError(
            f"--baseline {spec}: larger than {MAX_BASELINE_BYTES >> 20} MiB; not a baseline file"
        )
    try:
        return target, parse(raw.decode("utf-8"), f"--baseline {spec}")
    except UnicodeDecodeError:
        raise UsageError(f"--baseline {spec}: not UTF-8 text") from None
    except FleetInputError as exc:
        raise UsageError(str(exc)) from None


def fleet_main(request: FleetRequest) -> int:
    """Handler: 0 no outlier, 1 outliers found, 2 bad input, 3 an output could not be written."""
    from envcheck.cluster.fleet.baseline_file import render as render_baseline
    from envcheck.cluster.fleet.fleet_text import render_text
    from envcheck.cluster.fleet.learn import Rule
    from envcheck.cluster.fleet.page import render_html
    from envcheck.cluster.fleet.sources import FleetInputError, load
    from envcheck.cluster.fleet.survey import survey, to_dict

    if request.baseline and request.write_baseline:
        raise UsageError(
            "--baseline and --write-baseline: judge against a stored baseline or learn a new one, not both"
        )
    if sum(1 for r in request.reports if r == "-") > 1:
        raise UsageError("stdin (-) given more than once")
    rule = Rule(margin_pct=request.margin, z_max=request.z, min_nodes=request.min_nodes)
    try:
        stored_name, stored = stored_baseline(request.baseline) if request.baseline else (None, None)
        result = survey(load(request.reports), rule, stored, stored_name)
    except FleetInputError as exc:
        raise UsageError(str(exc)) from None
    doc = to_dict(result)
    out = sys.stderr if request.json == "-" else sys.stdout
    for line in render_text(doc):
        print(line, file=out)
    raise_failures(
        write_reports(
            [
                (request.json, lambda: json.dumps(doc, indent=2) + "\n"),
                (request.html, lambda: render_html(result)),
                (request.write_baseline, lambda: render_baseline(result.groups, rule, len(result.nodes))),
            ]
        )
    )
    return int(doc["exit_code"])
