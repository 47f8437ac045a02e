"""`envcheck fleet` on generated reports (tests/cluster/fleet_reports.py: real perf.relative verdicts and real JSON
reports over staged figures). Real: the CLI, reading, grouping, the baselines, the rule, text, JSON, HTML and the
baseline file. The multi-node Slurm run is tests/cluster/test_fleet_slurm.py. Every fault test asserts the exact set
of nodes (and GPUs) named, so naming a wrong one fails."""

from __future__ import annotations

import json
import os
import random
import re
from pathlib import Path
from typing import Any

import pytest

from envcheck.cluster.fleet.learn import CODES, Baseline, Rule, deviation, judge_group, learn
from envcheck.cluster.fleet.nodes import FleetNode, Metric, to_node
from envcheck.cluster.fleet.sources import Loaded, split_stream
from envcheck.cluster.fleet.survey import survey, to_dict
from envcheck.cluster.node_profiles import parse as parse_profile
from tests.cluster.fleet_reports import Faults, node_report, write_fleet
from tests.helpers import run_cli

FAULTS = Faults(
    gpu={("node0007", "3", "matmul.bfloat16"): 0.8, ("node0031", "5", "peer"): 0.5},
    node={"node0012": 0.85},
    busbw={"node0020": 0.7},
)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("fleet")
    write_fleet(folder, 40, FAULTS, seed=1)
    return folder


def fleet_json(*args: str) -> tuple[dict[str, Any], Any]:
    done = run_cli("fleet", *args, "--json", "-")
    assert "Traceback" not in done.stderr, done.stderr
    return json.loads(done.stdout), done


def violations(doc: dict[str, Any], node: str) -> list[dict[str, Any]]:
    return next(o["violations"] for o in doc["outlier_nodes"] if o["node"] == node)


def test_the_fleet_names_exactly_the_faulty_nodes_and_gpus(fleet: Path, tmp_path: Path) -> None:
    doc, done = fleet_json(
        str(fleet), "--html", str(tmp_path / "f.html"), "--write-baseline", str(tmp_path / "b.toml")
    )
    assert done.returncode == 1, done.stderr
    assert {o["node"] for o in doc["outlier_nodes"]} == {"node0007", "node0012", "node0020", "node0031"}
    (group,) = doc["groups"]
    assert group["group"] == "8x NVIDIA H100 80GB HBM3" and group["nodes"] == 40
    # one GPU slow: that GPU, that metric, nothing else on that node
    assert {(v["metric"], v["subject"], v["code"]) for v in violations(doc, "node0007")} == {
        ("matmul.bfloat16", "3", "fleet.matmul_slow")
    }
    # a whole node 15% slow (perf.relative passes it: all its GPUs are equally slow): every GPU on every kind
    slow_node = violations(doc, "node0012")
    assert {v["subject"] for v in slow_node if v["scope"] == "gpu"} == {str(i) for i in range(8)}
    assert {v["metric"] for v in slow_node} == {"matmul.bfloat16", "matmul.tf32", "hbm", "h2d", "d2h", "peer"}
    assert {(v["metric"], v["code"]) for v in violations(doc, "node0020")} == {
        ("dist.busbw.peak", "fleet.busbw_slow")
    }
    assert {v["subject"] for v in violations(doc, "node0031")} == {
        f"{min(i, 5)}-{max(i, 5)}" for i in range(8) if i != 5
    }
    # per finding code, how many nodes have it: the nodes' own (perf.relative) and the fleet's
    assert doc["codes"]["perf.matmul_slow"] == 1 and doc["codes"]["perf.peer_slow"] == 1
    assert "perf.hbm_slow" not in doc["codes"]  # node0012's GPUs are equally slow: not a relative finding
    assert doc["codes"]["fleet.matmul_slow"] == 2 and doc["codes"]["fleet.busbw_slow"] == 1
    assert doc["codes"]["fleet.peer_slow"] == 2
    text = done.stderr  # with --json - the text goes to stderr
    assert "read 40 report(s) from 40 source(s), 0 skipped" in text and "outlier nodes: 4 of 40" in text
    assert re.search(
        r"node0007 \(8x NVIDIA H100 80GB HBM3\): GPU 3 matmul.bfloat16 [\d.,]+ TFLOP/s: [12]\d(\.\d+)?% "
        r"worse, below the median",
        text,
    ), text


def test_a_healthy_fleet_has_no_outlier_and_exits_0(tmp_path: Path) -> None:
    write_fleet(tmp_path, 30, Faults(), seed=2)
    doc, done = fleet_json(str(tmp_path))
    assert done.returncode == 0 and doc["outlier_nodes"] == [] and doc["exit_code"] == 0
    assert all(b["mad"] > 0 for b in doc["groups"][0]["baselines"])


def test_a_baseline_file_judges_a_new_node_alone_and_a_profile_can_hold_it(tmp_path: Path) -> None:
    learned = tmp_path / "learned"
    learned.mkdir()
    write_fleet(learned, 20, Faults(), seed=3)
    baseline = tmp_path / "h100.baseline.toml"
    assert run_cli("fleet", str(learned), "--write-baseline", str(baseline)).returncode == 0
    new = tmp_path / "gpu09.json"
    new.write_text(json.dumps(node_report("gpu09", random.Random(4), Faults(node={"gpu09": 0.8}))))
    doc, done = fleet_json(str(new), "--baseline", str(baseline))
    assert done.returncode == 1 and [o["node"] for o in doc["outlier_nodes"]] == ["gpu09"]
    assert doc["rule"]["baseline"] == str(baseline)
    healthy = tmp_path / "gpu10.json"
    healthy.write_text(json.dumps(node_report("gpu10", random.Random(5), Faults())))
    assert fleet_json(str(healthy), "--baseline", str(baseline))[1].returncode == 0
    # pasted into a profile: the profile still loads, and the fleet reads its [baseline] table
    profile = tmp_path / "h100-site.toml"
    profile.write_text('description = "8x H100 SXM"\ngpu_count = 8\n\n' + baseline.read_text())
    assert parse_profile(profile.read_text(), "h100-site", str(profile)).gpu_count == 8
    assert fleet_json(str(new), "--baseline", str(profile))[1].returncode == 1


def test_malformed_reports_among_many_are_named_and_skipped(fleet: Path, tmp_path: Path) -> None:
    for path in sorted(fleet.glob("*.json"))[:10]:
        (tmp_path / path.name).write_bytes(path.read_bytes())
    (tmp_path / "broken.json").write_text('{"schema_version": 2, "results": [')
    (tmp_path / "other.json").write_text('{"kind": "something else"}')
    (tmp_path / "empty.json").write_text("")
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe\x00")
    os.mkfifo(tmp_path / "pipe.json")  # never opened for a blocking read
    doc, done = fleet_json(str(tmp_path))
    assert done.returncode == 1 and [o["node"] for o in doc["outlier_nodes"]] == ["node0007"], done.stderr
    skipped = {s["source"].rsplit("/", 1)[-1]: s["why"] for s in doc["read"]["skipped"]}
    assert set(skipped) == {"broken.json", "other.json", "empty.json", "binary.json", "pipe.json"}
    assert skipped["broken.json"].startswith("not JSON") and skipped["binary.json"] == "not UTF-8 text"
    assert skipped["other.json"].startswith("not an envcheck report") and "FIFO" in skipped["pipe.json"]
    assert "read 10 report(s) from 15 source(s), 5 skipped" in done.stderr


@pytest.mark.parametrize(
    "args, stdin, needle",
    [
        (["/nonexistent/reports"], None, "/nonexistent/reports: No such file or directory"),
        ([], None, "no reports given"),
        (["-"], "", "stdin is empty"),
        (["-"], "not json at all", "no envcheck report among 1 source(s); first: stdin #1: not JSON"),
        (["-", "-"], "{}", "stdin (-) given more than once"),
        (["-", "--margin", "150"], "{}", "must be a percentage from 0 to below 100"),
        (["-", "--min-nodes", "1"], "{}", "give a whole number of nodes from 2 up"),
        (["-", "--baseline", "/nonexistent.toml"], "{}", "--baseline /nonexistent.toml: cannot read it"),
        (["-", "--baseline", "h100-sxm-8"], "{}", "no [baseline.groups] table"),
        (["-", "--json", "/nonexistent-dir/f.json"], "{}", "folder /nonexistent-dir does not exist"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    args: list[str], stdin: str | None, needle: str, tmp_path: Path
) -> None:
    import subprocess
    import sys

    from tests.helpers import ROOT

    done = subprocess.run(
        [sys.executable, "-m", "envcheck", "fleet", *args],
        input=stdin or "",
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert needle in lines[0], lines[0]


def test_an_empty_folder_is_bad_input(tmp_path: Path) -> None:
    done = run_cli("fleet", str(tmp_path))
    assert (
        done.returncode == 2
        and done.stderr.strip() == f"envcheck: error: {tmp_path}: no *.json report in this folder"
    ), done.stderr


def test_stdin_takes_an_array_json_lines_or_documents_back_to_back_and_resumes_after_a_broken_one() -> None:
    doc = json.dumps({"a": 1})
    assert [i for i, _, p in split_stream(f"[{doc}, {doc}]") if not p] == [1, 2]
    assert [i for i, _, p in split_stream(f"{doc}\n{doc}\n{doc}") if not p] == [1, 2, 3]
    assert [i for i, _, p in split_stream(f"{doc}{doc}") if not p] == [1, 2]
    got = list(split_stream(f"{doc}\n{{broken\n{doc}\n"))
    assert [(i, bool(p)) for i, _, p in got] == [(1, False), (2, True), (3, False)]


def test_stdin_of_many_reports(fleet: Path) -> None:
    import subprocess
    import sys

    from tests.helpers import ROOT

    text = "\n".join(p.read_text() for p in sorted(fleet.glob("*.json")))
    done = subprocess.run(
        [sys.executable, "-m", "envcheck", "fleet", "-"],
        input=text,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 1 and "read 40 report(s) from 40 source(s)" in done.stdout, done.stderr


def test_names_from_reports_never_reach_the_terminal_or_the_page_raw(tmp_path: Path) -> None:
    rng = random.Random(6)
    evil = "\x1b[31mevil\x07<script>"
    for k in range(5):
        name = evil if k == 0 else f"n{k}"
        (tmp_path / f"{k}.json").write_text(json.dumps(node_report(name, rng, Faults(node={evil: 0.5}))))
    done = run_cli("fleet", str(tmp_path), "--html", str(tmp_path / "page.html"))
    assert done.returncode == 1
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout and "\\x1b[31mevil\\x07" in done.stdout
    page = (tmp_path / "page.html").read_text()
    assert "\x1b" not in page and "<script>" not in page and "&lt;script&gt;" in page


def test_duplicates_keep_the_last_report_and_say_so(tmp_path: Path) -> None:
    rng = random.Random(7)
    for k, name in enumerate(["a", "b", "c", "a"]):
        (tmp_path / f"{k}.json").write_text(json.dumps(node_report(name, rng, Faults())))
    doc, _ = fleet_json(str(tmp_path))
    assert doc["read"]["nodes"] == 3 and len(doc["read"]["duplicates"]) == 1
    assert doc["read"]["duplicates"][0].startswith("a: ") and doc["read"]["duplicates"][0].endswith("3.json")


def test_nodes_are_grouped_by_gpu_model_and_count_and_a_small_group_is_not_judged() -> None:
    rng = random.Random(8)
    docs = [(f"h{k}.json", node_report(f"h{k}", rng, Faults())) for k in range(5)]
    four = node_report("a0", rng, Faults(), gpus=4)
    four["facts"]["gpu"]["gpus"] = [{"index": i, "name": "NVIDIA A100-SXM4-80GB"} for i in range(4)]
    docs.append(("a0.json", four))
    result = survey(Loaded(documents=docs, sources=6), Rule())
    groups = {g.group: g for g in result.groups}
    assert set(groups) == {"8x NVIDIA H100 80GB HBM3", "4x NVIDIA A100-SXM4-80GB"}
    assert groups["4x NVIDIA A100-SXM4-80GB"].baselines == {}
    assert groups["4x NVIDIA A100-SXM4-80GB"].too_few["dist.busbw.peak"] == 1
    assert len(groups["8x NVIDIA H100 80GB HBM3"].baselines) == 7


def test_a_bench_document_is_a_node_too() -> None:
    doc = {
        "kind": "envcheck-bench",
        "device": {"cuda": False, "cpu_count": 2, "host": "cpu7"},
        "units": [{"name": "bench.cpu_matmul", "status": "pass"}],
        "figures": [
            {"key": "cpu_matmul.float32.n1024", "value": 55.0, "unit": "GFLOP/s", "better": "higher"}
        ],
    }
    node = to_node(doc, "x.json")
    assert (node.node, node.group) == ("cpu7", "no GPU (2 CPUs)")
    assert node.metrics == (Metric("cpu_matmul.float32.n1024", "node", "", 55.0, "GFLOP/s", "higher"),)


def test_the_html_page_is_self_contained_with_a_plot_per_metric(fleet: Path, tmp_path: Path) -> None:
    run_cli("fleet", str(fleet), "--html", str(tmp_path / "f.html"))
    page = (tmp_path / "f.html").read_text()
    assert "<script" not in page and not re.search(r"(src|href)=", page)
    assert not re.findall(r"https?://(?!www\.w3\.org/2000/svg)", page)
    assert page.count("<svg") == 7  # 5 GPU kinds, peer, dist.busbw.peak
    # red points, one per plot a node is outside: node0007 (bf16), node0012 (6 GPU and pair kinds), node0020 (busbw),
    # node0031 (peer)
    assert page.count('fill="#c00"') == 9
    assert "node0012: " in page and "Outlier nodes" in page


def test_median_and_mad_resist_the_masking_a_mean_and_sd_rule_suffers() -> None:
    # 10 healthy nodes and 3 broken ones at half speed: mean - 3 SD would sit below 0.5 and flag none
    values = [100.0 + d for d in (-1, 0, 1, 0.5, -0.5, 0.2, -0.2, 0.8, -0.8, 0.1)] + [50.0, 50.0, 50.0]
    import statistics

    assert statistics.mean(values) - 3 * statistics.stdev(values) < 50.0
    nodes = [
        FleetNode(f"n{i}", "g", "", (Metric("hbm", "node", "", v, "GB/s", "higher"),), ())
        for i, v in enumerate(values)
    ]
    result = judge_group("g", nodes, Rule())
    assert {v.node for v in result.violations} == {"n10", "n11", "n12"}


def test_the_rule_needs_both_the_margin_and_the_z_score() -> None:
    base = Baseline("m", "node", "u", "higher", 100.0, 0.1, 10, 10)
    assert deviation(98.0, base)[1] > 3.5  # 2% worse is 13 sigma in a uniform fleet ...
    nodes = [FleetNode("n", "g", "", (Metric("m", "node", "", 98.0, "u", "higher"),), ())]
    assert (
        judge_group("g", nodes, Rule(), {("m", "node"): base}).violations == []
    )  # ... but inside the 5% margin
    noisy = Baseline("m", "node", "u", "higher", 100.0, 10.0, 10, 10)
    slow = [FleetNode("n", "g", "", (Metric("m", "node", "", 90.0, "u", "higher"),), ())]
    assert judge_group("g", slow, Rule(), {("m", "node"): noisy}).violations == []  # 10% worse, z 0.67
    lower = Baseline("ms", "node", "ms", "lower", 10.0, 0.1, 10, 10)
    late = [FleetNode("n", "g", "", (Metric("ms", "node", "", 12.0, "ms", "lower"),), ())]
    (v,) = judge_group("g", late, Rule(), {("ms", "node"): lower}).violations
    assert v.worse_pct == 20.0 and v.code == "fleet.worse_than_baseline"


def test_a_metric_with_zero_spread_is_judged_by_the_margin_alone() -> None:
    samples = [(f"n{i}", Metric("peer", "pair", "0-1", 100.0, "GB/s", "higher")) for i in range(5)]
    base = learn("peer", "pair", samples)
    assert base.mad == 0
    assert deviation(94.0, base) == (6.0, float("inf")) and deviation(100.0, base) == (0.0, 0.0)


def test_fleet_codes_are_stable() -> None:
    assert CODES == (
        "fleet.matmul_slow",
        "fleet.hbm_slow",
        "fleet.memory_slow",
        "fleet.h2d_slow",
        "fleet.d2h_slow",
        "fleet.peer_slow",
        "fleet.busbw_slow",
        "fleet.burn_slow",
        "fleet.worse_than_baseline",
    )


def test_the_json_document_says_how_it_judged() -> None:
    rng = random.Random(9)
    loaded = Loaded(
        documents=[(f"{k}.json", node_report(f"n{k}", rng, Faults())) for k in range(4)], sources=4
    )
    doc = to_dict(survey(loaded, Rule()))
    assert doc["kind"] == "envcheck-fleet" and doc["rule"]["center"] == "median"
    assert "MAD" in doc["rule"]["spread"] and doc["rule"]["baseline"] == "learned from these reports"
    json.dumps(doc)


def test_the_documented_fleet_commands_run_as_written(tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.helpers import ROOT

    text = (ROOT / "docs" / "cluster.md").read_text()
    section = text[text.index("### Fleet baselines (`envcheck fleet`)") :]
    block = re.search(r"```sh\n(.*?)```", section, flags=re.S)
    assert block is not None
    commands = [line for line in block.group(1).splitlines() if line.strip()]
    assert len(commands) == 3
    (tmp_path / "reports").mkdir()
    write_fleet(tmp_path / "reports", 12, Faults(node={"node0003": 0.8}), seed=10)
    (tmp_path / "new-node.json").write_text(json.dumps(node_report("new-node", random.Random(12), Faults())))
    python = f"{sys.executable} -m envcheck"
    for command in commands:
        done = subprocess.run(
            ["sh", "-c", command.replace("envcheck ", f"{python} ", 1)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert done.returncode in (0, 1) and "Traceback" not in done.stderr, (command, done.stderr)
        assert done.stdout.startswith("envcheck fleet: read "), (command, done.stdout)
    assert {p.name for p in tmp_path.iterdir()} >= {"fleet.html", "fleet.json", "h100.baseline.toml"}
    assert json.loads((tmp_path / "fleet.json").read_text())["outlier_nodes"][0]["node"] == "node0003"


def test_a_node_that_missed_the_rollout_is_named_with_its_versions(tmp_path: Path) -> None:
    """Five H100 nodes, one on another driver, torch and NCCL (mixed NCCL versions across a job's ranks hang or fail
    its collectives): every figure is in line, yet the node is named in text, JSON and HTML, each differing version
    beside the majority's, and the fleet exits 1. The healthy twin (five nodes alike) names none and exits 0."""
    odd = {"driver_version": "550.54.15", "version": "2.13.0+cu130", "nccl_loaded": "2.21.5"}
    (tmp_path / "mixed").mkdir()
    (tmp_path / "alike").mkdir()
    write_fleet(tmp_path / "mixed", 5, Faults(versions={"node0003": odd}), seed=4)
    doc, done = fleet_json(str(tmp_path / "mixed"), "--html", str(tmp_path / "f.html"))
    assert (
        done.returncode == 1 and doc["outlier_nodes"] == [] and doc["version_outlier_nodes"] == ["node0003"]
    )
    got = {
        (d["field"], d["majority"], tuple((n["node"], n["value"]) for n in d["nodes"]))
        for d in doc["version_drift"]
    }
    assert got == {
        ("driver", "580.95.05", (("node0003", "550.54.15"),)),
        ("torch", "2.14.1+cu130", (("node0003", "2.13.0+cu130"),)),
        ("nccl", "2.27.7", (("node0003", "2.21.5"),)),
    }
    codes = {d["field"]: d["code"] for d in doc["version_drift"]}
    assert codes == {
        "driver": "fleet.driver_drift",
        "torch": "fleet.stack_drift",
        "nccl": "fleet.stack_drift",
    }
    assert doc["codes"]["fleet.driver_drift"] == 1 and doc["codes"]["fleet.stack_drift"] == 2
    text = run_cli("fleet", str(tmp_path / "mixed")).stdout
    assert "version outlier nodes: 1 of 5" in text
    assert (
        "NVIDIA H100 80GB HBM3 nccl: node0003 has 2.21.5 where 4 node(s) have 2.27.7 [fleet.stack_drift]"
        in text
    )
    page = (tmp_path / "f.html").read_text()
    assert "<h2>Version drift</h2>" in page and "node0003: 2.21.5" in page and "550.54.15" in page
    write_fleet(tmp_path / "alike", 5, Faults(), seed=4)
    doc, done = fleet_json(str(tmp_path / "alike"))
    assert done.returncode == 0 and doc["version_drift"] == [] and doc["version_outlier_nodes"] == []
    assert "version outlier nodes: 0 of 5" in run_cli("fleet", str(tmp_path / "alike")).stdout


def test_an_even_split_names_no_odd_node() -> None:
    """Two nodes on one NCCL and two on another: there is no majority to be off, so nobody is named."""
    from envcheck.cluster.fleet.drift import version_drift

    nodes = [(f"n{i}", "H100", {"nccl": "2.27.7" if i < 2 else "2.21.5"}) for i in range(4)]
    assert version_drift(nodes) == []
    nodes.append(("n4", "H100", {"nccl": "2.27.7"}))
    (drift,) = version_drift(nodes)
    assert drift.odd == (("n2", "2.21.5"), ("n3", "2.21.5")) and drift.majority_nodes == 3
