"""The relative verdict inside a node (`perf.relative`, `bench.relative`): pure, over measured figures.

A GPU, or a GPU pair, more than a margin below the node's best of the same kind is named with its figure and the
best's. No SKU table and no absolute floor: gpu-fryer's rule (huggingface/gpu-fryer, `--tflops-tolerance`: "TFLOPS
tolerance (%) compared to best GPU", default 10), applied to every kind perf.relative measures. A node whose GPUs are
all equally slow passes here: the fleet baseline (`envcheck fleet`) is what judges it.

A figure (envcheck.perf.figures) judged here carries `kind` (e.g. `matmul.bfloat16`, `hbm`, `h2d`, `d2h`, `peer`),
`scope` (`gpu`, `pair` or `device`), `subject` (`3`, `0-3`) and `device_label` (`GPU 3`, `GPU 0 -> GPU 3`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from envcheck.core.result import FaultClass, Result, failed, first_of, passed, warned

DEFAULT_MARGIN_PCT = 10.0  # gpu-fryer's default --tflops-tolerance


@dataclass(frozen=True)
class Kind:
    """One kind of figure: its finding code, how a finding names it, and the fix ({i}: the GPU's index)."""

    code: str
    label: str
    fix: str


_PCIE_FIX = (
    "nvidia-smi -q -d PCIE -i {i} (link generation or width below its maximum?); nvidia-smi topo -m (is the "
    "GPU's CPU/NUMA affinity the one the copy ran from?); lspci -vv -s <its PCI address> (LnkSta)"
)
# By the kind's first part (`matmul.bfloat16` -> `matmul`): the stable finding codes of the relative verdict.
KINDS: dict[str, Kind] = {
    "matmul": Kind(
        "perf.matmul_slow",
        "matmul",
        "nvidia-smi -q -d PERFORMANCE,CLOCK,POWER,TEMPERATURE -i {i} (clocks "
        "or power held down?); dcgmi diag -r 3 -i {i}; reseat or RMA the GPU if it stays slow",
    ),
    "hbm": Kind(
        "perf.hbm_slow",
        "HBM copy",
        "nvidia-smi -q -d CLOCK,ECC,ROW_REMAPPER -i {i} (memory clock, remapped "
        "rows); dcgmi diag -r 3 -i {i}; RMA the GPU if it stays slow",
    ),
    "h2d": Kind("perf.h2d_slow", "host-to-device copy", _PCIE_FIX),
    "d2h": Kind("perf.d2h_slow", "device-to-host copy", _PCIE_FIX),
    "peer": Kind(
        "perf.peer_slow",
        "peer copy",
        "nvidia-smi topo -m and nvidia-smi nvlink -s -i {i} (NVLinks down or "
        "inactive?); dcgmi diag -r 3; reseat the GPU or its NVLink bridge if one GPU is in every slow pair",
    ),
}
CODES = tuple(k.code for k in KINDS.values())


def kind_of(kind: str) -> Kind | None:
    """The Kind of a figure's `kind` (`matmul.tf32` -> matmul's), or None for a kind the verdict does not judge."""
    return KINDS.get(kind.split(".", 1)[0])


def describe(kind: str) -> str:
    """'matmul bfloat16', 'HBM copy': a figure's kind in words."""
    known = kind_of(kind)
    head, _, rest = kind.partition(".")
    return " ".join(filter(None, (known.label if known else head, rest)))


@dataclass(frozen=True)
class Finding:
    """One GPU or pair below the node's best of its kind."""

    code: str
    kind: str
    subject: str
    label: str  # 'GPU 3' or 'GPU 0 -> GPU 3'
    value: float
    best: float
    best_label: str
    unit: str
    deficit_pct: float

    def text(self, margin_pct: float) -> str:
        """'GPU 3: matmul bfloat16 612 TFLOP/s, 18.2% below the node's best (GPU 0: 748 TFLOP/s; margin 10%)'."""
        what = describe(self.kind)
        return (
            f"{self.label}: {what} {self.value:g} {self.unit}, {self.deficit_pct:.1f}% below the node's best "
            f"({self.best_label}: {self.best:g} {self.unit}; margin {margin_pct:g}%)"
        )


def _judged(
    figures: Sequence[Mapping[str, Any]], excluded: Mapping[str, str]
) -> dict[str, list[Mapping[str, Any]]]:
    """The figures this verdict compares, by kind: higher is better, a known kind, no GPU that was busy."""
    by_kind: dict[str, list[Mapping[str, Any]]] = {}
    for fig in figures:
        kind = fig.get("kind")
        if not isinstance(kind, str) or kind_of(kind) is None or fig.get("better") != "higher":
            continue
        value = fig.get("value")
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value != value:
            continue
        if any(gpu in excluded for gpu in str(fig.get("subject", "")).split("-")):
            continue
        by_kind.setdefault(kind, []).append(fig)
    return by_kind


def slow_findings(
    figures: Sequence[Mapping[str, Any]], margin_pct: float, excluded: Mapping[str, str] | None = None
) -> list[Finding]:
    """Every figure more than `margin_pct` below the best of its kind (`excluded`: GPU index -> why it is not
    judged, e.g. busy with another job; a pair with such a GPU is left out too). Worst deficit first."""
    found = []
    for kind, figs in _judged(figures, excluded or {}).items():
        if len(figs) < 2:
            continue
        best = max(figs, key=lambda f: float(f["value"]))
        top = float(best["value"])
        if top <= 0:
            continue
        for fig in figs:
            deficit = 100.0 * (top - float(fig["value"])) / top
            if deficit > margin_pct:
                found.append(
                    Finding(
                        code=kind_of(kind).code,  # type: ignore[union-attr]  # _judged keeps known kinds only
                        kind=kind,
                        subject=str(fig.get("subject", "")),
                        label=str(fig.get("device_label", "")),
                        value=float(fig["value"]),
                        best=top,
                        best_label=str(best.get("device_label", "")),
                        unit=str(fig.get("unit", "")),
                        deficit_pct=round(deficit, 1),
                    )
                )
    return sorted(found, key=lambda f: -f.deficit_pct)


def common_gpu(findings: Sequence[Finding]) -> str | None:
    """The GPU in every slow pair (two or more pairs), i.e. the GPU whose links are slow; None otherwise."""
    pairs = [set(f.subject.split("-")) for f in findings if f.kind == "peer"]
    if len(pairs) < 2:
        return None
    shared = set.intersection(*pairs)
    return next(iter(shared)) if len(shared) == 1 else None


def _fix(finding: Finding, suspect: str | None) -> str:
    kind = kind_of(finding.kind)
    assert kind is not None
    gpu = suspect if finding.kind == "peer" and suspect else finding.subject.split("-")[-1]
    return f"{finding.label}: {kind.fix.format(i=gpu)}"


def judge(
    figures: Sequence[Mapping[str, Any]],
    *,
    margin_pct: float = DEFAULT_MARGIN_PCT,
    strict: bool = False,
    excluded: Mapping[str, str] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Result:
    """perf.relative's Result: a node warning (a failure with `strict`) naming each slow GPU or pair and the best,
    or a pass saying what was compared. `extra` joins `measured` (the GPUs' names, their NVML state)."""
    excluded = dict(excluded or {})
    findings = slow_findings(figures, margin_pct, excluded)
    subjects = sorted({str(f.get("subject")) for f in figures if f.get("scope") in ("gpu", "device")})
    measured: dict[str, Any] = {
        "figures": list(figures),
        "margin_pct": margin_pct,
        "devices": len(subjects),
        "excluded": excluded,
        **(extra or {}),
    }
    expected = {"within_pct_of_best": margin_pct}
    skipped_note = "; ".join(f"GPU {gpu} not judged: {why}" for gpu, why in sorted(excluded.items()))
    if findings:
        suspect = common_gpu(findings)
        measured.update(
            findings=[asdict(f) for f in findings],
            codes=list(dict.fromkeys(f.code for f in findings)),
            suspect_gpu=suspect,
        )
        lines = [f.text(margin_pct) for f in findings]
        if suspect is not None:
            lines[0] += f"; GPU {suspect} is in every slow pair"
        make = failed if strict else warned
        fixes = " | ".join(dict.fromkeys(_fix(f, suspect) for f in findings))
        return make(
            first_of(lines),
            fixes,
            measured=measured,
            expected=expected,
            fault_class=FaultClass.NODE,
            code=findings[0].code,
            details="\n".join(lines + ([skipped_note] if skipped_note else [])),
        )
    kinds = sorted({str(f.get("kind")) for f in figures if f.get("kind")})
    noun = "GPU" if any(f.get("scope") == "gpu" for f in figures) else "device"
    if len(subjects) < 2:
        what = f"one {noun}" if len(subjects) == 1 else f"no {noun}"
        return passed(
            f"{what} measured ({', '.join(kinds) or 'nothing'}): nothing to compare inside the node; "
            "the fleet baseline (envcheck fleet) judges it" + (f"; {skipped_note}" if skipped_note else ""),
            measured=measured,
            expected=expected,
        )
    return passed(
        f"{len(subjects)} {noun}s within {margin_pct:g}% of the node's best on {', '.join(kinds)}"
        + (f"; {skipped_note}" if skipped_note else ""),
        measured=measured,
        expected=expected,
    )
