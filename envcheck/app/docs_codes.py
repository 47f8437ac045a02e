"""The finding codes page of the reference (docs/reference/codes.md): every code as its own section with an anchor."""

from __future__ import annotations

from envcheck.app.docs_markdown import HEADER, _text


def _code_section(code: str, heading_id: str, facts: str, meaning: str, fix: str) -> str:
    """One finding code as its own section: a heading with a stable id (a search hit and a link land on it), the
    fault class and drain, the meaning and the fix, wrapped as prose (no table column to cut off)."""
    return (
        f"### `{code}` {{#{heading_id}}}\n\n{facts}: {_text(' '.join(meaning.split()))}\n\n"
        f"Fix: {_text(' '.join(fix.split()))}\n\n"
    )


def _code_id(code: str) -> str:
    """The anchor of a code: the code itself (`codes.md#cuda.container`); `<check>.<status>` -> check.status."""
    return code.replace("<", "").replace(">", "")


def codes_page() -> str:
    """Every finding code as its own section (an anchor each): meaning, fault class, fix, and whether
    `--for health` drains on it; an index of every code first."""
    from envcheck.checks.cuda.codes import CUDA_CODES
    from envcheck.checks.gpu_health.xid import XID_CATALOG, meaning_of
    from envcheck.checks.gpu_health.xid_catalog import CATALOG
    from envcheck.cluster.finding_codes import TABLE
    from envcheck.cluster.severity import severity

    def drains(code: str, cls: str) -> str:
        """Only a node finding drains: at once (hard) or once it repeats (soft)."""
        level = severity(code)
        if "node" in cls.split(", "):
            return level.value if level else "hard"
        return level.value if level and not cls else "-"

    named = sorted(TABLE, key=lambda r: r.code)
    xids = sorted(set(CATALOG) | set(XID_CATALOG))
    families: dict[str, list[str]] = {}
    for code in [r.code for r in named] + [f"cuda.error.{n}" for n in sorted(CUDA_CODES)]:
        families.setdefault(code.split(".", 1)[0], []).append(code)
    index = "".join(
        f"- **{_text(family)}**: " + ", ".join(f"[`{c}`](#{_code_id(c)})" for c in codes) + "\n"
        for family, codes in families.items()
    )
    index += "- **xid**: " + ", ".join(f"[`xid.{n}`](#xid.{n})" for n in xids) + "\n"
    out = [
        "---\nhide:\n  - toc\n---\n",
        HEADER,
        "# Finding codes\n\nEvery finding carries a stable code: in the JSON report (`code`), as a JUnit "
        "property, as the `code` label of Prometheus' `envcheck_finding`, and in the drain reason "
        "`sinfo -R` shows (`envcheck: [node] gpu.health: ...`). A check that names no code gets "
        "`<check>.<status>`. The fault class says who acts: `node` (host, driver, hardware), `image` (the "
        "software in the image or venv), `config` (how the container or process was started). *Drains* is "
        "what `--for health` does with a node finding: `hard` drains at once, `soft` only after "
        "`--drain-after` runs in a row, `-` never. Each code has its own anchor: `codes.md#cuda.container`.\n\n",
        index,
        "\n## Codes the checks name\n\nFrom `envcheck.cluster.finding_codes.TABLE`, the one table every "
        "emitting module's constants are gathered in.\n\n",
    ]
    for row in named:
        cls = row.fault_class.value if row.fault_class else ""
        facts = f"**{cls or 'class by the finding'}**, drains: {drains(row.code, cls)}"
        out.append(_code_section(row.code, _code_id(row.code), facts, row.meaning, row.fix))
    out.append(
        "## CUDA errors\n\n`cuda.available` and `node.cuda_driver` name a CUDA driver error by its number.\n\n"
    )
    for n, (meaning, fix, cls) in sorted(CUDA_CODES.items()):
        code = f"cuda.error.{n}"
        facts = f"**{cls or 'class by the finding'}**, drains: {drains(code, cls)}"
        out.append(_code_section(code, code, facts, meaning, fix))
    out.append(
        "## Xid events\n\n`gpu.health` names each Xid in the kernel log since the driver loaded as "
        "`xid.<N>` (fault class `node`; `xid.13.repeated` and `xid.31.repeated` when an application Xid "
        "repeats on one GPU). Meaning and action from NVIDIA's Xid catalogue; *fails* says whether the "
        "finding fails (and drains) or warns. `<i>` is the GPU's index.\n\n"
    )
    for n in xids:
        m = meaning_of(n)
        fails = "no (the application)" if m.rank is None else "yes" if m.rank <= 1 else "no (warns)"
        fix = m.fix.replace("{i}", "<i>") or "the application's own error"
        out.append(_code_section(f"xid.{n}", f"xid.{n}", f"**node**, fails: {fails}", m.meaning, fix))
    return "".join(out)
