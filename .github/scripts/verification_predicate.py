"""Evidence of a GPU verification: build it (gpu-verify job), summarise it, and check it before promotion.

The predicate is the in-toto test-result predicate (https://in-toto.io/attestation/test-result/v0.1: `result`,
`passedTests`, `warnedTests`, `failedTests`, `configuration`, `url`), with our facts as extra fields; it is
attached to the image digest with `cosign attest --type` that URI; docs/publishing.md shows how to read it.
Stdlib only, so it runs on the self-hosted runner and on GitHub-hosted runners without installs.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import sys
from pathlib import Path
from typing import Any

PREDICATE_VERSION = 2  # 2: the in-toto test-result/v0.1 fields
PREDICATE_TYPE = "https://in-toto.io/attestation/test-result/v0.1"
_BAD = {"fail", "error"}
_RUN_ENV = {
    "repository": "GITHUB_REPOSITORY",
    "run_id": "GITHUB_RUN_ID",
    "run_attempt": "GITHUB_RUN_ATTEMPT",
    "sha": "GITHUB_SHA",
    "ref": "GITHUB_REF",
    "workflow_ref": "GITHUB_WORKFLOW_REF",
}


class EvidenceError(Exception):
    """Evidence that is missing, malformed or not a pass; printed as one line."""


def parse_gpus(csv_text: str) -> list[dict[str, str]]:
    """Rows of `nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv`."""
    rows = list(csv.reader(line for line in csv_text.splitlines() if line.strip()))
    if len(rows) < 2:
        return []
    keys = [key.strip().split(" ")[0] for key in rows[0]]
    return [{key: value.strip() for key, value in zip(keys, row, strict=False)} for row in rows[1:]]


def _status_counts(report: dict[str, Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for result in report.get("results", []):
        status = str(result.get("status", "")).lower()
        counts[status] = counts.get(status, 0) + 1
    return counts


def image_report(doc: dict[str, Any], ref: str) -> tuple[dict[str, Any] | None, int, str | None]:
    """(run report, exit code, container error) for `ref` from `envcheck image verify --json` output.

    That document is `{"images": [{"image", "error", "exit_code", "report"}], "exit_code"}`; a plain
    `envcheck run --json` report (with `results`) is accepted too.
    """
    if "images" not in doc:
        return doc, int(doc["exit_code"]), None
    entries = [entry for entry in doc["images"] if entry.get("image") == ref]
    if len(entries) != 1:
        return None, 1, f"the report has {len(entries)} entries for {ref} (expected 1)"
    entry = entries[0]
    return entry.get("report"), max(int(doc["exit_code"]), int(entry["exit_code"])), entry.get("error")


def _run_url(env: dict[str, str]) -> str:
    server, repo, run_id = (
        env.get("GITHUB_SERVER_URL", "https://github.com"),
        env.get("GITHUB_REPOSITORY"),
        env.get("GITHUB_RUN_ID"),
    )
    attempt = env.get("GITHUB_RUN_ATTEMPT")
    if not (repo and run_id):
        return ""
    return f"{server}/{repo}/actions/runs/{run_id}" + (f"/attempts/{attempt}" if attempt else "")


def _configuration(env: dict[str, str]) -> list[dict[str, Any]]:
    """in-toto ResourceDescriptors of what configured the test: the workflow and the matrix at that commit."""
    server, repo, sha = (
        env.get("GITHUB_SERVER_URL", "https://github.com"),
        env.get("GITHUB_REPOSITORY"),
        env.get("GITHUB_SHA"),
    )
    if not (repo and sha):
        return []
    out = [
        {
            "name": "docker/matrix.toml",
            "uri": f"{server}/{repo}/blob/{sha}/docker/matrix.toml",
            "digest": {"gitCommit": sha},
        }
    ]
    workflow = env.get("GITHUB_WORKFLOW_REF")  # owner/repo/.github/workflows/images.yml@refs/heads/main
    if workflow:
        path = workflow.split("@", 1)[0].removeprefix(f"{repo}/")
        out.insert(
            0, {"name": workflow, "uri": f"{server}/{repo}/blob/{sha}/{path}", "digest": {"gitCommit": sha}}
        )
    return out


def _test_results(predicate: dict[str, Any], report: dict[str, Any] | None) -> None:
    """Fill the in-toto test-result fields from the envcheck results (error counts as failed)."""
    results = (report or {}).get("results", [])
    by: dict[str, list[str]] = {"pass": [], "warn": [], "fail": [], "skip": []}
    for r in results:
        status = str(r.get("status", "")).lower()
        by["fail" if status in _BAD else status if status in by else "fail"].append(str(r.get("name", "?")))
    predicate.update(
        passedTests=by["pass"], warnedTests=by["warn"], failedTests=by["fail"], skippedTests=by["skip"]
    )
    if not predicate["passed"]:
        predicate["result"] = "FAILED"
    else:
        predicate["result"] = "WARNED" if by["warn"] else "PASSED"


def build(ref: str, report_text: str | None, gpus_text: str | None, env: dict[str, str]) -> dict[str, Any]:
    """The predicate for image `ref` (name@sha256:...) from the envcheck report and nvidia-smi output."""
    if "@sha256:" not in ref:
        raise EvidenceError(f"image reference {ref!r} is not pinned by digest (expected NAME@sha256:...)")
    predicate: dict[str, Any] = {
        "result": "FAILED",
        "passedTests": [],
        "warnedTests": [],
        "failedTests": [],
        "configuration": _configuration(env),
        "url": _run_url(env),
        "predicate_version": PREDICATE_VERSION,
        "image": ref,
        "digest": ref.split("@", 1)[1],
        "verified_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "gpus": parse_gpus(gpus_text or ""),
        "runner": {
            "name": env.get("RUNNER_NAME", ""),
            "os": env.get("RUNNER_OS", ""),
            "arch": env.get("RUNNER_ARCH", ""),
        },
        "run": {key: env.get(var, "") for key, var in _RUN_ENV.items()},
        "passed": False,
    }
    if report_text is None:
        predicate["error"] = "envcheck wrote no report (it crashed or never ran); see the job log"
        _test_results(predicate, None)
        return predicate
    try:
        report, exit_code, error = image_report(json.loads(report_text), ref)
    except (ValueError, KeyError, TypeError) as exc:
        predicate["error"] = f"envcheck report is not a JSON report with an exit_code ({exc!r})"
        _test_results(predicate, None)
        return predicate
    counts = _status_counts(report or {})
    predicate.update(
        exit_code=exit_code,
        status_counts=counts,
        report=report,
        passed=exit_code == 0 and error is None and sum(counts.values()) > 0 and not _BAD & counts.keys(),
    )
    if error is not None:
        predicate["error"] = error
    _test_results(predicate, report)
    return predicate


def check(ref: str, predicate: dict[str, Any]) -> None:
    """Raise unless the predicate is a pass for exactly `ref` (the gate before attest, sign and tag)."""
    if predicate.get("predicate_version") != PREDICATE_VERSION:
        raise EvidenceError(
            f"predicate_version {predicate.get('predicate_version')!r} is not {PREDICATE_VERSION}"
        )
    if predicate.get("image") != ref:
        raise EvidenceError(
            f"report is for {predicate.get('image')!r}, not the staged {ref!r}; refusing to promote"
        )
    if predicate.get("passed") is not True or predicate.get("result") not in ("PASSED", "WARNED"):
        why = predicate.get("error") or f"status counts {predicate.get('status_counts')}"
        raise EvidenceError(f"GPU verification of {ref} did not pass ({why}); refusing to promote")
    if not predicate.get("gpus"):
        raise EvidenceError(f"report for {ref} names no GPU (nvidia-smi output missing); refusing to promote")


def summary(predicate: dict[str, Any]) -> str:
    """Markdown for $GITHUB_STEP_SUMMARY: verdict, image, GPUs and drivers."""
    verdict = "PASS" if predicate.get("passed") else "NOT PASSED"
    lines = [
        f"### GPU verification: {verdict} ({predicate.get('result')})",
        "",
        f"- image: `{predicate.get('image')}`",
        f"- status counts: {predicate.get('status_counts', {})}",
    ]
    if predicate.get("error"):
        lines.append(f"- error: {predicate['error']}")
    for gpu in predicate.get("gpus", []):
        lines.append(
            f"- GPU {gpu.get('index', '?')}: {gpu.get('name', '?')}, driver {gpu.get('driver_version', '?')}"
        )
    return "\n".join(lines) + "\n"


def _read(path: str | None) -> str | None:
    return Path(path).read_text() if path and Path(path).is_file() else None


def main(argv: list[str] | None = None) -> int:
    """CLI: `build`, `summary` and `check`; exit 0 ok, 1 not a pass, 2 bad input."""
    parser = argparse.ArgumentParser(prog="verification_predicate.py")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build")
    b.add_argument("--ref", required=True)
    b.add_argument("--report")
    b.add_argument("--gpus")
    b.add_argument("--out", required=True)
    sub.add_parser("summary").add_argument("predicate")
    c = sub.add_parser("check")
    c.add_argument("--ref", required=True)
    c.add_argument("predicate")
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            predicate = build(args.ref, _read(args.report), _read(args.gpus), dict(os.environ))
            Path(args.out).write_text(json.dumps(predicate, indent=2) + "\n")
            return 0
        loaded = json.loads(Path(args.predicate).read_text())
        if args.command == "summary":
            sys.stdout.write(summary(loaded))
            return 0
        check(args.ref, loaded)
    except EvidenceError as exc:
        print(f"verification_predicate.py: {exc}", file=sys.stderr)
        return 1 if args.command == "check" else 2
    except (OSError, ValueError) as exc:
        print(f"verification_predicate.py: cannot read {exc}", file=sys.stderr)
        return 2
    print(f"verification_predicate.py: {args.ref} passed GPU verification")
    return 0


if __name__ == "__main__":
    sys.exit(main())
