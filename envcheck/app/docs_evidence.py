"""The evidence map of the reference (docs/reference/evidence.md): every source the node path reads, declared beside
its check (envcheck.checks.check_registry.EVIDENCE), with the codes it can lead to and their class, the rule's source and the tests;
beside it what leptonai/gpud's components, DCGM's health-watch systems and NVIDIA's Xid and SXid catalogues cover, and
whether envcheck reads and judges the same signal (envcheck.checks.peer_coverage and the catalogues' own data)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from envcheck.app.docs_markdown import HEADER, _table, _text
from envcheck.core.evidence import Kind, Source


def _classes(codes: Iterable[str]) -> str:
    """'code (class)' for each code, the class from the finding-code table."""
    from envcheck.cluster.finding_codes import lookup

    out = []
    for code in codes:
        row = lookup(code)
        who = row.fault_class.value if row is not None and row.fault_class is not None else "depends"
        out.append(f"`{code}` ({who})")
    return ", ".join(out)


def _sources(sources: Sequence[Source]) -> str:
    out = []
    for kind in Kind:
        rows = [
            (
                f"`{s.name}`",
                s.reads,
                _classes(s.codes) or f"none of its own: {s.qualifies}",
                s.rule,
                ", ".join(f"`{t}`" for t in s.tests),
            )
            for s in sources
            if s.kind is kind
        ]
        if rows:
            out.append(f"\n### {kind.value[0].upper()}{kind.value[1:]}\n\n")
            out.append(
                _table(("source", "what is read", "codes (class)", "the rule's source", "tests"), rows)
            )
    return "".join(out)


def _peer(rows: Sequence[object], what: str) -> str:
    from envcheck.checks.peer_coverage import PeerRow

    table = [
        (
            r.signal,
            r.they_read,
            r.they_judge,
            r.status,
            _classes(r.codes)
            if r.codes
            else (
                ", ".join(f"`{k}`" for k in r.reads) + (f": {r.why_not}" if r.why_not else "")
                if r.reads
                else r.why_not
            ),
        )
        for r in rows
        if isinstance(r, PeerRow)
    ]
    return _table(
        (what, "what it reads", "what it concludes", "envcheck", "envcheck's codes, sources or why not"),
        table,
    )


def _counts(rows: Sequence[tuple[str, str]]) -> dict[str, int]:
    """Rows per status."""
    out = {"judged": 0, "read": 0, "not": 0}
    for _, status in rows:
        out[status] = out.get(status, 0) + 1
    return out


def evidence_page() -> str:
    """The whole map: a summary, the sources, then each peer and catalogue side by side."""
    from envcheck.checks.check_registry import EVIDENCE
    from envcheck.checks.dcgm.dcgm_sources import HEALTH_SYSTEMS
    from envcheck.checks.gpu_health.log_evidence import sxid_coverage, xid_coverage
    from envcheck.checks.peer_coverage import DCGM_ROWS, GPUD_ROWS

    xids, sxids = xid_coverage(), sxid_coverage()
    peers = [
        ("leptonai/gpud components", [(r.signal, r.status) for r in GPUD_ROWS]),
        ("DCGM health-watch systems", [(r.signal, r.status) for r in DCGM_ROWS]),
        ("NVIDIA's Xid catalogue", [(str(x.number), x.status) for x in xids]),
        ("NVIDIA's SXid catalogue", [(str(x.number), x.status) for x in sxids]),
    ]
    summary = [(name, str(len(rows)), *(str(c) for c in _counts(rows).values())) for name, rows in peers]
    return (
        "---\nhide:\n  - toc\n---\n"
        + HEADER
        + "# Evidence map\n\n"
        + _text(
            "Every source envcheck reads on a node, the finding codes each can lead to (with who must act), where each "
            "rule comes from and the tests that inject its faults and healthy twins; then, side by side, what other "
            "GPU health checkers and NVIDIA's own catalogues cover, and whether envcheck reads (collects, to qualify "
            "other findings) or judges (can change the verdict) the same signal. Generated from the declarations "
            "beside the checks (`envcheck.checks.check_registry.EVIDENCE`, `envcheck.checks.peer_coverage`); do not edit by hand."
        )
        + "\n\n## Summary\n\n"
        + _table(("against", "rows", "judged", "read", "not"), summary)
        + "\n## What envcheck reads on a node\n"
        + _sources(EVIDENCE)
        + "\n## Side by side\n\n### leptonai/gpud's components\n\n"
        + _text(
            "gpud v0.13.0-alpha.4 (commit 4a8de33a), `components/accelerator/nvidia/*` and the host components."
        )
        + "\n\n"
        + _peer(GPUD_ROWS, "component")
        + "\n### DCGM's health-watch systems\n\n"
        + _text(
            "DCGM 4.6.0, `modules/health/DcgmHealthWatch.cpp`: what envcheck reads of the same signal itself, where "
            "DCGM is not installed. Where an operator runs DCGM and set its watches, `dcgm.health` reads DCGM's own "
            "verdict for every system as well."
        )
        + "\n\n"
        + _peer(DCGM_ROWS, "system")
        + "\n"
        + _text(
            "Through `dcgm.health`, where DCGM runs and an operator set its watches (DCGM's own word on each system):"
        )
        + "\n\n"
        + _table(
            ("system", "DCGM enum", "what DCGM's rule judges", "envcheck's code", "envcheck's verdict"),
            [
                (h.name, f"`{h.enum}` ({h.value:#x})", h.judges, f"`{h.code}`", h.verdict)
                for h in HEALTH_SYSTEMS
            ],
        )
        + "\n### NVIDIA's Xid catalogue\n\n"
        + _table(
            ("Xid", "NVIDIA's name", "NVIDIA's resolution", "envcheck", "how"),
            [(str(x.number), x.name, x.nvidia, x.status, x.how) for x in xids],
        )
        + "\n### NVIDIA's SXid catalogue\n\n"
        + _table(
            ("SXid", "NVIDIA's name", "NVIDIA's class", "envcheck", "how"),
            [(str(x.number), x.name, x.nvidia, x.status, x.how) for x in sxids],
        )
    )
