"""What an Xid's own message says beyond its number, judged by the source that says it:
- an NVLink5 Xid (144-150) by the row of NVIDIA's decode sheet its fields select (checks.gpu_health.nvlink5); one
  whose record lacks the fields, or matches no row, by the Xid 154 the driver logs after it (the catalogue's "Xid 154
  linkage": from R565 the driver follows these Xids with its recovery action), else a warning that says why;
- Xid 94/95 by the reset fields the driver prints with them: "RST: %s, D-RST: %s" (src/nvidia/src/kernel/gpu/arch/
  ampere/kern_gpu_error_cont_ga100.c, _gpuGenerateErrorLog: bGpuResetReqd, bGpuDrainAndResetReqd), which also mark
  the GPU for reset or for drain-and-reset (gpuMarkDeviceForReset, gpuMarkDeviceForDrainAndReset);
- Xid 74's link training failure, naming the link and the remote GPU: "NVLink: Failed to train link %d to remote
  PCI:%04x:%02x:%02x" (src/nvidia/src/kernel/gpu/nvlink/kernel_nvlinkcorelibtrain.c, knvlinkTrainP2pLinksToActive;
  "failed to train link" in the sysmem and fabric variants of the same file), and Xid 136's "NVLink: Link training
  failed for link %u(...)" (Hopper, kernel_nvlink_gh100.c, knvlinkLogAliDebugMessages_GH100) or "... for links
  0x%llx(...)" (Blackwell, kernel_nvlink_gb100.c: a mask of links);
- Xid 154 by its action code, whatever label the driver prints (field logs of newer drivers print "PF FLR" and "OS
  Reboot" for codes 0x1 and 0x2).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from envcheck.checks.gpu_health.nvlink5 import NVLINK5, decode, fields, link_down_reason
from envcheck.checks.gpu_health.xid import XidMeaning, meaning_of
from envcheck.checks.gpu_health.xid_catalog import BUCKET_RANK, BUCKETS

UNDECODED_RANK = 2  # warn: an NVLink5 Xid the sheet cannot decode and the driver gave no recovery action for
RESET = "nvidia-smi -r -i {i} (GPU reset)"
_RST = re.compile(r"\bRST: (Yes|No), D-RST: (Yes|No)")
_TRAIN = re.compile(
    r"NVLink: [Ff]ailed to train link (?P<link>\d+) to remote PCI:(?P<remote>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})"
)
_ALI = re.compile(r"NVLink: Link training failed for (?:link (?P<link>\d+)|links (?P<mask>0x[0-9a-fA-F]+))")
# Xid 154's action codes (src/common/sdk/nvidia/inc/ctrl/ctrl2080/ctrl2080gpu.h, NV2080_CTRL_GPU_RECOVERY_ACTION_*),
# with the labels 565 to 595.45 print for them (src/nvidia/src/kernel/gpu/gpu.c, _gpuRecoveryActionName).
ACTION_LABELS = {
    0: "None",
    1: "GPU Reset Required",
    2: "Node Reboot Required",
    3: "Drain P2P",
    4: "Drain and Reset",
    5: "Recover IMEX Domain",
}


@dataclass(frozen=True)
class Judged:
    """One record's meaning, the finding code it leads to, and words on where the verdict comes from."""

    meaning: XidMeaning
    code: str
    why: str = ""


def recovery_label(event: Mapping[str, Any]) -> str | None:
    """Xid 154's action as the label of its code (the code decides: labels differ between driver releases)."""
    code = event.get("action_code")
    if isinstance(code, int) and code in ACTION_LABELS:
        return ACTION_LABELS[code]
    action = event.get("action")
    return action if isinstance(action, str) else None


def record_key(xid: int, text: str) -> str | None:
    """What sets one record of an Xid apart from another of the same Xid on the same GPU for the verdict (the sheet's
    bucket of an NVLink5 Xid, the reset fields of Xid 94/95); None: every record of the Xid is judged alike."""
    if xid in NVLINK5:
        found = fields(text)
        decoded = decode(xid, found) if found else None
        return decoded.bucket if decoded else "undecoded"
    if xid in (94, 95):
        rst = _RST.search(text)
        return f"RST {rst[1]}, D-RST {rst[2]}" if rst else None
    return None


def judge(event: Mapping[str, Any], siblings: Sequence[Mapping[str, Any]]) -> Judged | None:
    """What `event` (one Xid entry of a GPU) means from its own message, among the GPU's other Xid entries
    (`siblings`); None when its message adds nothing to its number's meaning."""
    xid, text = int(event["xid"]), str(event.get("text") or "")
    if xid in NVLINK5:
        return _nvlink5(xid, text, siblings)
    if xid in (94, 95):
        return _reset_fields(xid, text)
    if xid in (74, 136):
        return _training(xid, text)
    return None


def judge_cause(cause: int, siblings: Sequence[Mapping[str, Any]]) -> Judged | None:
    """The Xid another names as its cause (45's "caused by previous Xid 149"): by its own records on the GPU when the
    log has them (the worst), an NVLink5 Xid without one as not decodable; None: by its number."""
    own = [j for e in siblings if e.get("xid") == cause and (j := judge(e, siblings)) is not None]
    if own:
        return min(own, key=lambda j: 9 if j.meaning.rank is None else j.meaning.rank)
    if cause in NVLINK5:
        return _undecoded(cause, f"the Xid {cause} record itself is not in the log read", siblings)
    return None


def _recovery_named(siblings: Iterable[Mapping[str, Any]]) -> str | None:
    """The recovery action of the GPU's Xid 154, when the log has one that still applies."""
    for e in siblings:
        if e.get("xid") == 154 and (label := recovery_label(e)) and label != "None":
            return label
    return None


def _undecoded(xid: int, why: str, siblings: Sequence[Mapping[str, Any]]) -> Judged:
    """An NVLink5 Xid the sheet cannot decode: the driver's own recovery action decides when it logged one (that Xid
    154 is a finding of its own), else a warning."""
    said = f"NVLink5 error, not decoded by NVIDIA's Xid 144-150 sheet: {why}"
    action = _recovery_named(siblings)
    if action:
        return Judged(
            XidMeaning(f"{said}; the driver's Xid 154 on this GPU names its recovery action: {action}", None),
            f"xid.{xid}",
        )
    return Judged(
        XidMeaning(
            f"{said}; no Xid 154 (the recovery action the driver logs after it from R565) on this GPU in the log "
            "read: not drained",
            UNDECODED_RANK,
            "read the Xid's whole record (dmesg | grep 'Xid') and decode its IntrInfo and errorStatus with the "
            "'Xid 144-150 Decode' sheet of NVIDIA's Xid catalogue; nvidia-smi -q -i {i} | grep -i -A1 recovery",
        ),
        f"xid.{xid}.undecoded",
    )


def _nvlink5(xid: int, text: str, siblings: Sequence[Mapping[str, Any]]) -> Judged:
    found = fields(text)
    if found is None:
        return _undecoded(
            xid,
            "the record does not carry the fields the sheet decodes (unit, Fatal/Nonfatal, XC, link, IntrInfo, "
            "errorStatus)",
            siblings,
        )
    decoded = decode(xid, found)
    tag = "Fatal" if found.fatal else "Nonfatal"
    if decoded is None:
        return _undecoded(
            xid,
            f"no row matches unit {found.unit}, IntrInfo 0x{found.intrinfo:08x}, errorStatus 0x{found.status:08x} "
            f"(the line says {tag})",
            siblings,
        )
    row = decoded.row
    reason = (
        f", link-down reason code {link_down_reason(found)}"
        if row.units[-1] == "NETIR_LINK_DOWN" and link_down_reason(found)
        else ""
    )
    sheet = (
        f"NVIDIA's Xid 144-150 sheet, row {row.row} ({decoded.version}{', action 2' if decoded.action2 else ''}): "
        f"{decoded.bucket}, severity {row.severity}"
    )
    rank = BUCKET_RANK.get(decoded.bucket, UNDECODED_RANK)
    fatal_row = decoded.bucket == "RESET_GPU"
    differs = (
        f"; the line says {tag}, the sheet's row is followed" if found.fatal is not fatal_row else f"; {tag}"
    )
    meaning = f"NVLink5 {found.unit} error on {found.where()}{reason}; {sheet}{differs}"
    if decoded.bucket == "XID_154_EVAL":
        action = _recovery_named(siblings)
        then = (
            f"the driver's Xid 154 on this GPU names {action} (judged on its own)"
            if action
            else "no Xid 154 on this GPU: the application restarts"
        )
        return Judged(XidMeaning(f"{meaning}; {then}", None), f"xid.{xid}")
    fix = (
        f"drain; {RESET}; then {BUCKETS.get(row.investigate, row.investigate)}"
        if rank is not None and rank <= 1
        else BUCKETS.get(decoded.bucket, decoded.bucket)
    )
    return Judged(XidMeaning(meaning, rank, fix), f"xid.{xid}")


def _reset_fields(xid: int, text: str) -> Judged | None:
    """Xid 94/95 whose reset fields ask for a reset (RST) or a drain and reset (D-RST); None when both say No."""
    found = _RST.search(text)
    if found is None or (found[1], found[2]) == ("No", "No"):
        return None
    asks = "a GPU reset (RST: Yes)" if found[1] == "Yes" else "a drain, then a GPU reset (D-RST: Yes)"
    base = meaning_of(xid)
    return Judged(
        XidMeaning(f"{base.meaning}; the driver's record asks for {asks}", 1, f"drain, then {RESET}"),
        f"xid.{xid}",
    )


def _training(xid: int, text: str) -> Judged | None:
    """Xid 74/136 link training failures, naming the link(s) and, for 74, the GPU at the link's other end."""
    base = meaning_of(xid)
    train = _TRAIN.search(text) if xid == 74 else None
    if train is not None:
        return Judged(
            XidMeaning(
                f"{base.meaning}: link {train['link']} did not train to the GPU at PCI {train['remote']}, so "
                "NVLink peer-to-peer over it is lost (NVIDIA: 'A GPU reset or node reboot is needed to clear this "
                "error')",
                base.rank,
                base.fix,
            ),
            f"xid.{xid}",
        )
    ali = _ALI.search(text) if xid == 136 else None
    if ali is None:
        return None
    links = (
        ali["link"]
        if ali["link"]
        else ", ".join(str(n) for n in range(64) if int(ali["mask"], 16) >> n & 1) or ali["mask"]
    )
    return Judged(
        XidMeaning(
            f"{base.meaning}: NVLink training failed on link(s) {links}, which stay down", base.rank, base.fix
        ),
        f"xid.{xid}",
    )
