"""node.profile: the node is the type its profile says (GPU model and count, driver floor, PCIe link, NVLinks up), from
NVML (budgeted) and the PCI bus, without torch; a mismatch has a stable code, a missing GPU its bus address."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from envcheck.checks.gpu_health.xid import pci_key
from envcheck.checks.node.config_causes import no_gpu_given
from envcheck.core.check import Context, ProfileOptions
from envcheck.core.result import FaultClass, Result, failed, first_of, passed, skipped
from envcheck.probe.gpu_access import Allocation, allocation, read_access
from envcheck.probe.nvml import NVML_BUDGET_S, hang_text, read_nvml
from envcheck.probe.nvml_fields import Fields, Missing, value
from envcheck.probe.nvml_health import link_states
from envcheck.probe.pci import SYSFS_PCI, pci_gpus

# Finding codes this module emits (each one is in envcheck.cluster.finding_codes.TABLE).
NODE_GPU_COUNT = "node.gpu_count"
NODE_GPU_COUNT_SCOPE = "node.gpu_count_scope"
DRIVER_FLOOR = "profile.driver_floor"
PROFILE_GPU_COUNT = "profile.gpu_count"
GPU_MODEL = "profile.gpu_model"
NVLINK_DOWN = "profile.nvlink_down"
PCIE_LINK = "profile.pcie_link"

LOST_FIX = (
    "drain; dmesg | grep -iE 'fallen off the bus|Xid'; lspci -s {pci}; reboot the node, then reseat the GPU "
    "or RMA it"
)


def _nvml_body(state: dict[str, Any]) -> Any:
    def fill(pynvml: Any, progress: dict[str, Any]) -> None:
        fields = Fields(pynvml)
        progress["call"] = "nvmlSystemGetDriverVersion"
        driver = fields.driver_version()
        if isinstance(driver, Missing):  # nothing more to read: the verdict works from the PCI bus alone
            return
        state["driver_version"] = driver
        progress["call"] = "nvmlDeviceGetCount"
        count = fields.count()
        for i in range(count if isinstance(count, int) else 0):
            progress.update(call=f"NVML reads of GPU {i}", gpu=i)
            state["gpus"].append(_gpu(fields, i))

    return fill


def _gpu(fields: Fields, i: int) -> dict[str, Any]:
    h = fields.handle(i)
    if isinstance(h, Missing):
        return {"index": i, "error": h.error}
    return {
        "index": i,
        "name": value(fields.name(h)) or "",
        "pci": value(fields.pci_bus(h)),
        "pcie_gen_max": value(fields.pcie(h, current=False, width=False)),
        "pcie_width": value(fields.pcie(h, current=True, width=True)),
        "nvlinks": link_states(fields, h),
        "mig": fields.mig(h) is True,  # NVML reports a MIG GPU's links as down: they are not judged
    }


def capture(budget_s: float = NVML_BUDGET_S, sysfs: str = SYSFS_PCI) -> dict[str, Any]:
    """NVML's driver version and per-GPU name, PCI address, PCIe link and NVLink states; the PCI bus's GPUs."""
    state: dict[str, Any] = {"driver_version": None, "gpus": [], "nvml_error": None}
    got = read_nvml(
        _nvml_body(state), lambda exc: state.update(nvml_error=f"NVML could not start: {exc}"), budget_s
    )
    if got.hang is not None:
        state["nvml_error"] = hang_text(got.hang)
    return {**state, "pci_gpus": pci_gpus(sysfs), "access": read_access()}


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text))


def _missing(pci_bus: Any, gpus: list[dict[str, Any]], alloc: Allocation) -> list[str]:
    listed = {pci_key(g["pci"]) for g in gpus if isinstance(g.get("pci"), str)}
    return (
        [
            a
            for a in pci_bus
            if isinstance(a, str) and pci_key(a) not in listed and alloc.ours(pci_key(a) or "")
        ]
        if isinstance(pci_bus, list)
        else []
    )


def expected_count(p: ProfileOptions, expect_gpus: int | None) -> tuple[int | None, str]:
    """The GPU count this node must have, and the finding code its shortfall carries: --expect-gpus (which binds
    the torch-free node path as it binds the torch path's cuda.devices; the front door sets it from the profile
    unless given), else the profile's."""
    count = expect_gpus if expect_gpus is not None else p.gpu_count
    return count, PROFILE_GPU_COUNT if p.gpu_count is not None and count == p.gpu_count else NODE_GPU_COUNT


def findings(
    p: ProfileOptions, data: Mapping[str, Any], expect_gpus: int | None = None
) -> list[tuple[str, str, str]]:
    """(code, problem, fix) for every way the node differs from the profile, most severe first."""
    gpus = [g for g in data.get("gpus") or [] if isinstance(g, dict)]
    kind = p.description or p.profile or "this node"
    out: list[tuple[str, str, str]] = []
    count, code = expected_count(p, expect_gpus)
    alloc = _given(data)
    if count is not None and not alloc.whole_node and alloc.count is not None and alloc.count < count:
        out.append(
            (
                NODE_GPU_COUNT_SCOPE,
                f"{count} GPU(s) expected, but this process was given {alloc.count} by "
                f"{alloc.source}: the expectation counts a whole node's GPUs",
                "run the node check on the host (a Slurm prolog, a privileged DaemonSet), or expect the GPUs "
                f"this process is given (--expect-gpus {alloc.count})",
            )
        )
    elif count is not None and len(gpus) != count:
        missing = _missing(data.get("pci_gpus"), gpus, alloc)
        tail = (
            f": {', '.join(missing)} missing"
            if missing
            else "; the PCI bus does not show the missing GPU(s) either"
            if len(gpus) < count
            else ""
        )
        expected = kind if kind.startswith(f"{count}x") else f"{count} GPU(s) of {kind}"
        out.append(
            (
                code,
                f"{expected} expected, {len(gpus)} found{tail}",
                LOST_FIX.format(pci=missing[0] if missing else "<address>")
                if len(gpus) < count
                else "this node has more GPUs than its profile: fix the profile (gpu_count) or the node's type",
            )
        )
    if p.gpu_model:
        wrong = [g for g in gpus if p.gpu_model.lower() not in str(g.get("name", "")).lower()]
        if wrong:
            out.append(
                (
                    GPU_MODEL,
                    f"GPU {wrong[0]['index']} is {wrong[0].get('name') or 'unnamed'!r}, "
                    f"the profile expects {p.gpu_model!r}"
                    + (f" (+{len(wrong) - 1} more)" if len(wrong) > 1 else ""),
                    "run this node under the profile of its GPU model, or fix gpu_model",
                )
            )
    have = data.get("driver_version")
    if p.driver_floor and isinstance(have, str) and _version(have) < _version(p.driver_floor):
        out.append(
            (
                DRIVER_FLOOR,
                f"driver {have} is older than the profile's floor {p.driver_floor}",
                f"upgrade the NVIDIA driver to >= {p.driver_floor} (and the fabric manager with it on NVSwitch "
                "systems), then reboot",
            )
        )
    for g in gpus:
        gen, width = g.get("pcie_gen_max"), g.get("pcie_width")
        if (p.pcie_gen and isinstance(gen, int) and gen < p.pcie_gen) or (
            p.pcie_width and isinstance(width, int) and width < p.pcie_width
        ):
            out.append(
                (
                    PCIE_LINK,
                    f"GPU {g['index']} ({g.get('pci')}): PCIe link gen {gen} x{width}, the "
                    f"profile expects gen {p.pcie_gen} x{p.pcie_width}",
                    f"reseat the GPU and its riser; lspci -vv -s {g.get('pci')} | grep -E 'LnkCap|LnkSta'; "
                    "check the BIOS slot settings",
                )
            )
    for g in gpus:
        links = g.get("nvlinks")
        if p.nvlink_links and isinstance(links, list) and g.get("mig") is not True:
            up = sum(1 for s in links if s == 1)
            if up < p.nvlink_links:
                down = [n for n, s in enumerate(links) if s != 1]
                out.append(
                    (
                        NVLINK_DOWN,
                        f"GPU {g['index']} ({g.get('pci')}): {up} of {p.nvlink_links} "
                        f"NVLinks up" + (f" (down: {', '.join(map(str, down[:18]))})" if down else ""),
                        f"nvidia-smi nvlink -s -i {g['index']}; on NVSwitch systems check nvidia-fabricmanager; "
                        "reset the GPU (nvidia-smi -r) or reboot; RMA the baseboard if links stay down",
                    )
                )
    return out


def _given(data: Mapping[str, Any]) -> Allocation:
    access = data.get("access")
    return allocation(access if isinstance(access, dict) else {}, data.get("pci_gpus") or [])


def _no_gpu(data: Mapping[str, Any], count: int, code: str, kind: str, node_mode: bool) -> Result | None:
    """NVML cannot start and the node must have GPUs: a node with no driver or no GPU left fails, naming the GPUs
    the PCI bus still shows (with no driver bound) or that it shows none; None when the bus shows them all."""
    bus = data.get("pci_gpus")
    access = data.get("access") if isinstance(data.get("access"), dict) else {}
    nodes = (access or {}).get("device_nodes") or {}
    taken = (access or {}).get("driver_gpus")
    driver = (
        ""
        if nodes or (access or {}).get("proc_view") not in (None, "absent")
        else "no NVIDIA driver (no /dev/nvidia*, no /proc/driver/nvidia); "
    )
    if not driver and (
        (isinstance(taken, dict) and len(taken) >= count) or (isinstance(bus, list) and len(bus) >= count)
    ):
        return (
            None  # NVML alone cannot tell, and the driver (or the bus) shows every GPU: not judged on a guess
        )
    seen = (
        f"the PCI bus shows {len(bus)} NVIDIA GPU(s): {', '.join(bus[:8])}"
        if isinstance(bus, list) and bus
        else "the PCI bus shows none either"
        if isinstance(bus, list)
        else f"the PCI bus cannot be read ({bus})"
    )
    given = no_gpu_given(access or {})
    if given:  # envcheck's own container was started without GPUs: that says nothing of the node's
        return failed(
            f"{kind}: {count} GPU(s) expected: {given.problem}",
            given.fix,
            measured={k: data.get(k) for k in ("pci_gpus", "nvml_error", "access")},
            fault_class=given.fault_class,
            code=given.code,
        )
    fix = (
        "load the NVIDIA driver (modprobe nvidia; nvidia-smi), or reinstall it; " if driver else ""
    ) + LOST_FIX.format(pci=bus[0] if isinstance(bus, list) and bus else "<address>")
    # The node modes run on the host (or a DaemonSet given every GPU): none there is the node's, as cuda.available's
    # no-driver finding is (cluster.policy.reclassify); in a pod's preflight it is the pod spec's.
    return failed(
        f"{kind}: {count} GPU(s) expected, none usable: {driver}{data.get('nvml_error')}; {seen}",
        fix,
        measured={k: data.get(k) for k in ("pci_gpus", "nvml_error", "access")},
        fault_class=FaultClass.NODE if node_mode else FaultClass.CONFIG,
        code=code,
    )


def verdict(
    data: Mapping[str, Any], p: ProfileOptions, expect_gpus: int | None = None, node_mode: bool = True
) -> Result:
    """Fail (a node fault) on each way the node differs from its profile or --expect-gpus; skip without either,
    or when NVML cannot tell and nothing is expected of the GPU count."""
    measured = {
        "profile": p.profile,
        "expect_gpus": expect_gpus,
        **{k: data.get(k) for k in ("driver_version", "gpus", "pci_gpus")},
    }
    count, code = expected_count(p, expect_gpus)
    kind = p.description or p.profile or "this node"
    if data.get("nvml_error") and not data.get("gpus"):
        if count:
            none = _no_gpu(data, count, code, kind, node_mode)
            if none is not None:
                return none
        return skipped(
            f"NVML cannot tell whether this node matches {p.profile or 'its expectation'}: "
            f"{data['nvml_error']}",
            measured=measured,
        )
    found = findings(p, data, expect_gpus)
    if found:
        measured["codes"] = [c for c, _, _ in found]
        scope = found[0][0] == NODE_GPU_COUNT_SCOPE
        return failed(
            first_of([problem for _, problem, _ in found]),
            " | ".join(dict.fromkeys(f for _, _, f in found)),
            measured=measured,
            fault_class=FaultClass.CONFIG if scope else FaultClass.NODE,
            code=found[0][0],
        )
    name = f"profile {p.profile} ({p.description or '-'})" if p.profile else f"--expect-gpus {expect_gpus}"
    return passed(f"matches {name}: {len(data.get('gpus') or [])} GPU(s)", measured=measured)


def profile_check(ctx: Context) -> Result:
    """This node against its --profile and --expect-gpus (skips without either)."""
    p = ctx.options.profile
    if p.profile is None and (ctx.expect_gpus is None or not ctx.options.node_path):
        return skipped(
            "no --profile given (e.g. --profile h100-sxm-8); --expect-gpus binds node.profile on the "
            "node path (--for prolog|health|npd) and cuda.devices on the torch path"
        )
    left = ctx.time_left()
    return verdict(
        capture(NVML_BUDGET_S if left is None else max(1.0, min(NVML_BUDGET_S, left - 1.0))),
        p,
        ctx.expect_gpus,
        ctx.options.cluster_mode in ("prolog", "health", "npd"),
    )
