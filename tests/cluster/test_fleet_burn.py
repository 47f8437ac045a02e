"""`envcheck fleet` over `envcheck burn` reports: a node whose burn checksum of a workload differs from the one most
nodes of its model and stack agree on is named (fleet.burn_checksum), even though a single-device node has nothing
inside to compare with; two that disagree with no majority are both named; other stacks are never compared; burn
throughput is learned as a baseline like any figure (fleet.burn_slow), and `envcheck burn --baseline` judges a node
against it (far below: burn.straggler_fleet, a node fault).

Real: one CPU burn of this machine (its report as `envcheck burn --json` writes it), the fleet command, the baseline
file. Staged: the other nodes are copies of that report under other host names, with one checksum or figure changed
as a broken node's would be. About 20 s (two short burns).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import torch.distributed  # noqa: F401  # imported once here: each burn's budget then starts at its fork

from envcheck.app.main import main

# timing: the healthy twins need a burn report with no straggler, which rests on the workers' measured throughput
pytestmark = [pytest.mark.slow, pytest.mark.timing]
LIGHT = "matmul.float32,reduce"  # one worker: no all-reduce
# One CPU worker a node: these tests judge a node against the fleet, and two workers on this machine's two cores
# differ by 20-40% when the test runner shares a core with one of them (a within-node straggler, test_cpu_burn's).
ONE_WORKER = ("--allow-cpu", "--cpu-workers", "1")


@pytest.fixture(scope="module")
def burn_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("burn") / "burn.json"
    assert main(["burn", *ONE_WORKER, "--budget", "6s", "--only", LIGHT, "--json", str(path)]) == 0
    doc: dict[str, Any] = json.loads(path.read_text())
    return doc


def node(
    doc: dict[str, Any], host: str, checksum: str | None = None, torch: str | None = None, speed: float = 1.0
) -> dict[str, Any]:
    """`doc` as node `host`'s report; its matmul.float32 checksum, torch version or throughput changed if asked."""
    out = copy.deepcopy(doc)
    for r in out["results"]:
        r["measured"]["host"] = host
        for s in r["measured"].get("checksums", []):
            if s["workload"] == "matmul.float32" and checksum:
                s["checksum"] = checksum
            if torch:
                s["stack"]["torch"] = torch
        for f in r["measured"].get("figures", []):
            f["value"] *= speed
    return out


def fleet(tmp_path: Path, docs: list[dict[str, Any]], *flags: str) -> tuple[int, dict[str, Any]]:
    folder = tmp_path / "reports"
    folder.mkdir(exist_ok=True)
    for d in docs:
        host = d["results"][0]["measured"]["host"]
        (folder / f"{host}.json").write_text(json.dumps(d))
    out = tmp_path / "fleet.json"
    code = main(["fleet", str(folder), "--json", str(out), *flags])
    return code, json.loads(out.read_text()) if out.exists() else {}


def test_a_node_whose_burn_computed_other_bits_is_named(
    tmp_path: Path, burn_report: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    docs = [node(burn_report, h) for h in ("node-a", "node-b", "node-d")]
    docs.append(node(burn_report, "node-c", checksum="0badc0de0badc0de"))
    code, doc = fleet(tmp_path, docs)
    assert code == 1
    assert doc["checksum_outlier_nodes"] == ["node-c"] and doc["codes"]["fleet.burn_checksum"] == 1
    (m,) = doc["burn_checksums"]
    assert m["workload"] == "matmul.float32" and m["majority_nodes"] == 3
    assert m["nodes"] == [{"node": "node-c", "checksum": "0badc0de0badc0de"}]
    assert "node-c has 0badc0de0badc0de where 3 node(s) have" in capsys.readouterr().out


def test_the_healthy_twin_nodes_that_agree_name_nobody(tmp_path: Path, burn_report: dict[str, Any]) -> None:
    code, doc = fleet(tmp_path, [node(burn_report, f"node-{k}") for k in "abcd"])
    assert code == 0 and doc["burn_checksums"] == [] and doc["checksum_outlier_nodes"] == []


def test_two_nodes_that_disagree_are_both_named_with_no_majority(
    tmp_path: Path, burn_report: dict[str, Any]
) -> None:
    code, doc = fleet(
        tmp_path, [node(burn_report, "node-a"), node(burn_report, "node-b", checksum="0badc0de")]
    )
    assert code == 1 and doc["checksum_outlier_nodes"] == ["node-a", "node-b"]
    assert doc["burn_checksums"][0]["majority"] is None


def test_another_software_stack_is_never_compared(tmp_path: Path, burn_report: dict[str, Any]) -> None:
    docs = [node(burn_report, h) for h in ("node-a", "node-b", "node-c")]
    docs.append(node(burn_report, "node-d", checksum="0badc0de", torch="2.99.0"))  # other kernels, other bits
    code, doc = fleet(tmp_path, docs)
    assert doc["burn_checksums"] == [] and code == 0


def test_burn_throughput_is_a_fleet_baseline_and_a_slow_node_is_named(
    tmp_path: Path, burn_report: dict[str, Any]
) -> None:
    docs = [
        node(burn_report, f"node-{k}", speed=s) for k, s in zip("abcd", (0.95, 1.0, 1.0, 1.05), strict=True)
    ]
    docs.append(node(burn_report, "node-e", speed=0.5))
    code, doc = fleet(tmp_path, docs)
    assert code == 1 and [o["node"] for o in doc["outlier_nodes"]] == ["node-e"]
    assert {v["code"] for v in doc["outlier_nodes"][0]["violations"]} == {"fleet.burn_slow"}


def burn_against(tmp_path: Path, burn_report: dict[str, Any], speeds: tuple[float, ...]) -> dict[str, Any]:
    baseline = tmp_path / "baseline.toml"
    docs = [node(burn_report, f"node-{k}", speed=s) for k, s in enumerate(speeds)]
    fleet(tmp_path, docs, "--write-baseline", str(baseline))
    report = tmp_path / "mine.json"
    main(
        [
            "burn",
            *ONE_WORKER,
            "--budget",
            "6s",
            "--only",
            LIGHT,
            "--baseline",
            str(baseline),
            "--json",
            str(report),
        ]
    )
    doc: dict[str, Any] = json.loads(report.read_text())
    return next(r for r in doc["results"] if r["name"] == "burn.stragglers")


def test_burn_against_a_fleet_three_times_faster_is_a_node_fault(
    tmp_path: Path, burn_report: dict[str, Any]
) -> None:
    slow = burn_against(tmp_path, burn_report, (2.9, 3.0, 3.0, 3.1))
    assert (
        slow["status"] == "fail" and slow["code"] == "burn.straggler_fleet" and slow["fault_class"] == "node"
    )
    assert "below the fleet's median" in slow["summary"]


def test_the_healthy_twin_burn_inside_its_fleets_spread_passes(
    tmp_path: Path, burn_report: dict[str, Any]
) -> None:
    ok = burn_against(tmp_path, burn_report, (0.8, 0.9, 1.0, 1.1, 1.2))
    assert ok["status"] == "pass", ok["summary"]
    assert ok["measured"]["baseline"].endswith("baseline.toml")
