"""`envcheck host`: the front door of the host preflight (envcheck.host): its flags, the table and the JSON."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import Any

from envcheck.app.args import output_path
from envcheck.app.requests import Handler, Request
from envcheck.core.errors import ExitCode
from envcheck.core.text import visible


def print_host(doc: dict[str, Any]) -> None:
    """The human form: one line per fact, then the rows. Every value from outside (a GPU name, Docker's and the
    compose file's text, paths) goes through core.text.visible: shown, never markup or a terminal sequence."""
    from rich.table import Table
    from rich.text import Text

    from envcheck.app.terminal import Terminal

    console = Terminal(highlight=False, width=200 if not sys.stdout.isatty() else None)

    def line(text: str) -> None:
        console.print(Text(visible(text)), soft_wrap=True)

    gpu = doc["gpu"]
    if not gpu["gpus"]:
        line(f"No NVIDIA GPU: {gpu['why_none'] or 'none listed'}. Listing what each row needs.")
    else:
        caps = ", ".join(
            f"{g['name']} (sm_{str(g['compute_capability']).replace('.', '')})"
            if g["compute_capability"]
            else f"{g['name']} (compute capability unknown)"
            for g in gpu["gpus"]
        )
        line(
            f"Driver {gpu['driver'] or '?'} (CUDA {gpu['driver_cuda'] or '?'}, from {gpu['source']}); GPUs: {caps}"
        )
    line(doc["docker"]["summary"])
    for spec in doc["cdi"]["specs"]:
        if not spec["error"]:
            line(f"CDI {spec['kind']}: {', '.join(spec['devices']) or 'no devices'} ({spec['path']})")
    problems = [
        *doc["cdi"]["problems"],
        *filter(None, [doc["dev_char"].get("problem")]),
        *(doc["compose"]["problems"] if "compose" in doc else []),
    ]
    for p in problems:
        line(f"problem ({p['fault_class']}): {p['problem']} -> fix: {p['fix']}")
    if "compose" in doc and not doc["compose"]["problems"]:
        names = doc["compose"]["gpu_services"]
        line(
            f"{doc['compose']['file']}: "
            + (
                f"the GPU requests of {', '.join(names)} all get CUDA (compute)"
                if names
                else "no GPU request"
            )
        )
    table = Table(title=Text(visible(f"which images run here, {doc['platform']} ({doc['matrix']})")))
    for col in ("row", "torch", "cuda", "runs", "why", "tags (runtime; devel, jupyter, ssh alike)"):
        table.add_column(col, overflow="fold")
    for row in doc["rows"]:
        runs = {True: Text("yes", style="green"), False: Text("no", style="red"), None: Text("?")}[
            row["runs"]
        ]
        table.add_row(
            *(Text(visible(row[k])) for k in ("row", "torch", "cuda")),
            runs,
            Text(visible(row["why"])),
            Text(visible(", ".join(t for t in row["tags"] if t.endswith("-runtime")))),
        )
    console.print(table)


@dataclass(frozen=True, kw_only=True)
class HostRequest(Request):
    """`envcheck host`'s arguments."""

    matrix: str | None
    compose: str | None
    json: str | None

    def outputs(self) -> dict[str, str | None]:
        """--json."""
        return {"--json": self.json}


def cmd_host(request: HostRequest) -> int:
    """`envcheck host`: 0 (it reports), 1 when --compose FILE has a GPU request problem, 2 on bad input."""
    from envcheck.app.output import write_output
    from envcheck.host.collect import collect

    doc = collect(request.matrix, request.compose)
    code = ExitCode.FAILED if doc.get("compose", {}).get("problems") else ExitCode.OK
    if request.json:
        write_output(request.json, json.dumps(doc, indent=2) + "\n")  # atomic; a failure is one line, exit 3
        if request.json == "-":
            return code
    print_host(doc)
    return code


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `host` subcommand."""
    host = sub.add_parser(
        "host",
        help="before pulling: the driver, GPUs, Docker GPU setup, and which image "
        "rows will run here (no torch needed)",
    )
    host.add_argument(
        "--matrix",
        metavar="PATH",
        help="a matrix file (default: ENVCHECK_MATRIX, else the matrix envcheck ships)",
    )
    host.add_argument(
        "--compose",
        metavar="FILE",
        help="lint this compose file's GPU requests (capabilities without compute; exit 1 when one is wrong)",
    )
    host.add_argument("--json", type=output_path, metavar="PATH", help="write JSON ('-' = stdout only)")
    host.set_defaults(handler=Handler(HostRequest, cmd_host))
