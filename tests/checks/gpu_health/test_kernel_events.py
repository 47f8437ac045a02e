"""Which of the kernel log's records still apply (checks.gpu_health.kernel_events), and what each driver message means
(driver_findings, nvml_down): a rule each, with the record that breaks it and its healthy twin. The records are the
driver's real texts (its format strings in open-gpu-kernel-modules; the field corpus's excerpts, cited in
field_records/SOURCES.md), as /dev/kmsg holds them. Staged: the rest of the node (NVML's view, /proc/driver/nvidia),
as gpu_health's capture would have read it."""

from __future__ import annotations

from typing import Any

import pytest

from envcheck.checks.gpu_health.bundle_shape import validate
from envcheck.checks.gpu_health.kernel_events import scan
from envcheck.checks.gpu_health.verdict import verdict
from envcheck.core.check import CheckOptions, Context
from envcheck.core.result import FaultClass, Result, Status

START = "nvidia-nvlink: Nvlink Core is being initialized, major device number 237"
BANNER = (
    "NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  (dvs-builder@U22)"
)
XID79 = "NVRM: Xid (PCI:0000:2b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
XID13 = "NVRM: Xid (PCI:0000:2b:00): 13, pid=4242, name=python, Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0)"
ATTACH = "NVRM: GPU at PCI:0000:2b:00: GPU-5a1c0b52-66f7-0f0e-2f55-39d3fbd5a6b5"
FELL = (
    "NVRM: The NVIDIA GPU 0000:b3:00.0\\x0aNVRM: (PCI ID: 10de:26b5) installed in this system has\\x0aNVRM: "
    "fallen off the bus and is not responding to commands."
)
PROBE_FAILED = "NVRM: The NVIDIA probe routine failed for 1 device(s)."
NONE_INIT = "NVRM: None of the NVIDIA devices were initialized."
# field corpus 017 (open-gpu-kernel-modules#1230): the GSP line names the driver's GPU instance, the next its address
GSP_BOOT = "NVRM: GPU6 _kgspBootGspRm: unexpected WPR2 already up, cannot proceed with booting GSP"
RMINIT = "NVRM: GPU 0000:a1:00.0: RmInitAdapter failed! (0x62:0x40:2168)"
RMINIT_MINOR = "NVRM: GPU 0000:a1:00.0: rm_init_adapter failed, device minor number 7"
HEARTBEAT = (
    "NVRM: GPU6 _kgspIsHeartbeatTimedOut: Heartbeat timed out, currentTimeMs 812751949 heartbeat 1899482"
)
# field corpus 053: an Xid 119 names both the address and the instance number
XID119 = (
    "NVRM: Xid (PCI:0001:6c:00): 119, pid=10200, name=NvmlTaskRunner, Timeout after 45s of waiting for RPC "
    "response from GPU5 GSP! Expected function 76 (GSP_RM_CONTROL) sequence 3 (0x20800a4c 0x4)."
)
# field corpus 059 (2016): RmInitAdapter without the address, the minor on the next line
OLD_RMINIT = [
    "NVRM: RmInitAdapter failed! (0x26:0xffff:1375)",
    "NVRM: rm_init_adapter failed for device bearing minor number 0",
]
XID154 = (
    "NVRM: Xid (PCI:0000:48:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"
)
XID154_DONE = (
    "NVRM: Xid (PCI:0000:48:00): 154, GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)"
)
# field corpus 049 (570.124): Xid 45 naming the Xid that caused it
XID45 = (
    "NVRM: Xid (PCI:0000:dc:00): 45, pid=4146, name=python, channel 0x00000023, caused by previous Xid 149"
)
MIG_XID = (
    "NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, Contained: CE User Channel (0x9). RST: No, D-RST: No"
)
VFIO = "NVRM: GPU 0000:01:00.0 is already bound to vfio-pci."


def kmsg(*texts: str) -> list[str]:
    return [f"4,{n},{n * 1000},-;{t}" for n, t in enumerate(texts, start=1)]


def judge(found: dict[str, Any], **state: Any) -> Result:
    data: dict[str, Any] = {
        "nvml_error": None,
        "gpus": [],
        "pci_gpus": [],
        "kernel_log": {
            "source": "/dev/kmsg",
            "error": None,
            **{k: found[k] for k in ("xid", "bus", "driver")},
        },
        **state,
    }
    validate(data, "gpu_health")
    return verdict(data, Context(options=CheckOptions(node_path=True, cluster_mode="health")))


def gpu(index: int, pci: str, **fields: Any) -> dict[str, Any]:
    return {"index": index, "name": "NVIDIA H100 80GB HBM3", "pci": pci, "persistence": True, **fields}


def node_fault(result: Result) -> bool:
    return result.status is Status.FAIL and result.fault_class is FaultClass.NODE


def test_a_reload_after_a_fault_drops_the_old_instance_with_or_without_its_first_line() -> None:
    assert scan(kmsg(XID79))["xid"]  # the fault
    assert scan(kmsg(XID79, START, BANNER))["xid"] == []
    assert scan(kmsg(XID79, BANNER))["xid"] == []  # a grep that lost the start line


def test_probe_failures_before_a_banner_are_that_loads_even_without_its_first_line() -> None:
    assert [b["pci"] for b in scan(kmsg(FELL, PROBE_FAILED, BANNER))["bus"]] == ["0000:b3:00"]
    assert scan(kmsg(FELL, PROBE_FAILED, BANNER, START, BANNER))["bus"] == []  # a clean reload after it


def test_a_load_that_failed_then_a_reload_still_under_way_keeps_the_failed_loads_state() -> None:
    found = scan(kmsg(START, FELL, PROBE_FAILED, NONE_INIT, START))  # field corpus 011's shape
    assert [b["pci"] for b in found["bus"]] == ["0000:b3:00"]
    assert "no_devices" in {d["kind"] for d in found["driver"]}


def test_a_gpu_attach_line_forgets_only_that_gpus_earlier_xids() -> None:
    found = scan(kmsg(XID79, RMINIT, RMINIT_MINOR, ATTACH, XID13))
    assert [x["xid"] for x in found["xid"]] == [13]  # the 79 was an earlier GPU object's
    assert {d["kind"] for d in found["driver"]} == {
        "init_failed",
        "init_failed_minor",
    }  # its start still stands


def test_the_cursor_and_window_apply_to_xids_not_to_what_the_driver_said_of_a_start() -> None:
    lines = kmsg(RMINIT, XID79)
    found = scan(lines, after_seq=2)
    assert found["xid"] == [] and found["driver"][0]["kind"] == "init_failed"


def test_the_driver_gpu_instance_number_is_mapped_only_through_the_log() -> None:
    found = scan(kmsg(GSP_BOOT, RMINIT, RMINIT_MINOR, HEARTBEAT))
    by_kind = {d["kind"]: d for d in found["driver"]}
    assert by_kind["gsp_boot"]["pci"] == "0000:a1:00" and by_kind["gsp_heartbeat"]["pci"] == "0000:a1:00"
    assert by_kind["init_failed_minor"]["minor"] == 7  # minor 7 is GPU6: never mapped by the minor
    alone = scan(kmsg(HEARTBEAT))["driver"][0]
    assert alone["pci"] is None and alone["gpu_index"] == 6
    assert scan(kmsg(XID119))["xid"][0]["gpu_index"] == 5


def test_an_old_rminitadapter_line_takes_the_minor_of_the_line_after_it() -> None:
    found = scan(kmsg(*OLD_RMINIT))
    minors = {d["kind"]: d.get("minor") for d in found["driver"]}
    assert minors == {"init_failed": 0, "init_failed_minor": 0}
    state = {"access": {"driver_gpus": {"0000:01:00": {"minor": 0}}}, "pci_gpus": ["0000:01:00.0"]}
    result = judge(found, nvml_error="NVML could not start: Unknown Error", **state)
    assert node_fault(result) and result.code == "gpu.init_failed" and "PCI 0000:01:00.0" in result.summary


def test_xid_154s_last_action_is_the_gpus_current_one() -> None:
    reset = judge(scan(kmsg(XID154)), gpus=[gpu(0, "00000000:48:00.0")])
    assert node_fault(reset) and "asks for a GPU reset" in reset.summary
    done = judge(scan(kmsg(XID154, XID154_DONE)), gpus=[gpu(0, "00000000:48:00.0")])
    assert done.status is Status.PASS, done.summary


def test_an_xid_caused_by_an_earlier_one_is_judged_as_that_one() -> None:
    found = scan(kmsg(XID45))
    assert found["xid"][0]["cause"] == 149
    result = judge(found, gpus=[gpu(0, "00000000:DC:00.0")])
    # the 149's own record is not in the log: NVIDIA's decode sheet cannot judge it, so it warns (not a drain)
    assert result.code == "xid.149.undecoded" and "caused by Xid 149" in result.summary
    assert result.status is Status.WARN
    plain = judge(
        scan(kmsg(XID45.replace(", caused by previous Xid 149", ""))), gpus=[gpu(0, "00000000:DC:00.0")]
    )
    assert plain.status is Status.PASS  # Xid 45 alone is the application's cleanup


def test_a_mig_attributed_xid_is_read_and_names_its_instance() -> None:
    (event,) = scan(kmsg(MIG_XID))["xid"]
    assert (event["pci"], event["xid"], event["mig"]) == ("0000:01:00", 94, "GPU-I:05")
    result = judge(scan(kmsg(MIG_XID)), gpus=[gpu(0, "00000000:01:00.0")])
    assert "on MIG instance GPU-I:05" in result.summary


def test_a_gpu_bound_to_vfio_is_a_vms_not_lost() -> None:
    found = scan(kmsg(VFIO))
    state = {"pci_gpus": ["0000:01:00.0", "0000:02:00.0"], "gpus": [gpu(0, "00000000:02:00.0")]}
    assert judge(found, **state).status is Status.PASS
    assert judge(scan([]), **state).code == "gpu.lost"  # its twin: without the line, a GPU NVML lost


@pytest.mark.parametrize(
    "reads_now, status",
    [(False, Status.FAIL), (True, Status.WARN)],
    ids=["NVML cannot open it: fails", "NVML reads it now: a later open initialised it"],
)
def test_an_init_failure_is_judged_with_what_nvml_sees_now(reads_now: bool, status: Status) -> None:
    found = scan(kmsg(RMINIT, RMINIT_MINOR))
    listed = (
        gpu(0, "00000000:A1:00.0")
        if reads_now
        else {"index": 0, "error": "nvmlDeviceGetHandleByIndex: Unknown Error"}
    )
    result = judge(found, gpus=[listed], pci_gpus=["0000:a1:00.0"])
    assert result.status is status and result.code == "gpu.gsp_boot"  # 0x62: the GSP firmware's init


@pytest.mark.parametrize(
    "versions, nvml_error, code, fault",
    [
        ({"kernel_module": "580.82.07", "userspace": "580.95.05"}, None, "driver.api_mismatch", "node"),
        (
            {"kernel_module": "580.95.05", "userspace": None},
            "NVML could not start: Driver/library version mismatch",
            "driver.api_mismatch",
            "node",
        ),
        ({"kernel_module": "580.95.05", "userspace": "580.95.05"}, None, "driver.client_mismatch", "image"),
    ],
    ids=["the two halves differ", "NVML refuses the module", "a client with its own libraries"],
)
def test_an_api_mismatch_is_the_nodes_unless_its_own_libraries_match(
    versions: dict[str, Any], nvml_error: str | None, code: str, fault: str
) -> None:
    # field corpus 020's record (journal form there): the client 580.95.05 against the module 580.82.07
    record = (
        "NVRM: API mismatch: the client has the version 580.95.05, but\\x0aNVRM: this kernel module has the version "
        "580.82.07.  Please\\x0aNVRM: make sure that this kernel module and all NVIDIA driver\\x0aNVRM: components have "
        "the same version."
    )
    gpus = [] if nvml_error else [gpu(0, "00000000:3B:00.0")]
    result = judge(scan(kmsg(record)), versions=versions, nvml_error=nvml_error, gpus=gpus)
    assert result.code == code and result.fault_class == fault, result.summary


@pytest.mark.parametrize(
    "state, code",
    [
        (
            {"pci_gpus": ["0000:3b:00.0"], "access": {"device_nodes": {}, "proc_view": "absent"}},
            "driver.not_loaded",
        ),
        (
            {"pci_gpus": ["0000:3b:00.0"], "access": {"in_container": True, "device_nodes": {}}},
            "cuda.container",
        ),
        (
            {
                "pci_gpus": ["0000:3b:00.0"],
                "access": {
                    "in_container": True,
                    "device_nodes": {"0": "ok"},
                    "driver_capabilities": "compute",
                },
            },
            "cuda.capabilities",
        ),
    ],
    ids=[
        "a host with GPUs and no module",
        "envcheck's container given no GPU",
        "a container without 'utility'",
    ],
)
def test_nvml_that_cannot_start_is_explained(state: dict[str, Any], code: str) -> None:
    result = judge(scan([]), nvml_error="NVML could not start: Driver Not Loaded", **state)
    assert result.code == code, result.summary


def test_nvml_that_cannot_start_unexplained_is_cannot_judge_on_the_node_path_and_a_skip_off_it() -> None:
    data = {"pci_gpus": ["0000:3b:00.0"], "access": {"device_nodes": {"0": "ok"}, "proc_view": "host"}}
    result = judge(scan([]), nvml_error="NVML could not start: Unknown Error", **data)
    assert result.status is Status.ERROR and result.fault_class is None and "cannot judge" in result.summary
    off = verdict(
        {"nvml_error": "NVML could not start: Unknown Error", "gpus": [], "kernel_log": {}, **data}, Context()
    )
    assert off.status is Status.SKIP


# A review's finds, each a real shape of node (the driver's format strings at the cited lines), kept as tests.
NOT_LOADED = {
    "nvml_error": "NVML could not start: Driver Not Loaded",
    "nvml_code": 9,
    "access": {"device_nodes": {}, "proc_view": "absent", "in_container": False},
}
UNLOAD = "nvidia-nvlink: Unregistered Nvlink Core, major device number 237"


def test_a_cpu_node_where_the_driver_finds_no_gpu_is_not_judged() -> None:
    """nv.c: 'No NVIDIA GPU found.' when no NVIDIA VGA/3D function is on the bus (a uniform image on CPU nodes, a
    cluster-wide prolog): a skip, never a drain; a GPU node saying the same has its GPUs on the bus (a node fault)."""
    lines = kmsg(START, "NVRM: No NVIDIA GPU found.", UNLOAD)
    assert judge(scan(lines), **NOT_LOADED).status is Status.SKIP
    assert node_fault(judge(scan(lines), pci_gpus=["0000:3b:00.0"], **NOT_LOADED))


def test_a_hypervisor_whose_every_gpu_is_bound_to_vfio_is_not_judged() -> None:
    """nv.c 945-961 and nv-pci.c's check_for_bound_driver: the driver's normal output on a passthrough host
    (field corpus 031 kept only its first line)."""
    lines = kmsg(
        START,
        VFIO,
        "NVRM: The NVIDIA probe routine was not called for 1 device(s).",
        "NVRM: This can occur when another driver was loaded and \\x0aNVRM: obtained ownership of the NVIDIA device(s).",
        "NVRM: No NVIDIA devices probed.",
        UNLOAD,
    )
    state = {"pci_gpus": ["0000:01:00.0"], "pci_drivers": {"0000:01:00.0": "vfio-pci"}, **NOT_LOADED}
    assert judge(scan(lines), **state).status is Status.SKIP
    nouveau = {**state, "pci_drivers": {"0000:01:00.0": "nouveau"}}
    taken = [line for line in lines if "vfio" not in line]
    assert node_fault(judge(scan(taken), **nouveau))  # its twin: nouveau took the GPU, not a VM


@pytest.mark.parametrize("xid, status", [(175, Status.FAIL), (173, Status.FAIL), (176, Status.WARN)])
def test_xids_newer_than_the_catalogue_sheet_are_judged_from_nverror_h(xid: int, status: Status) -> None:
    line = f"NVRM: Xid (PCI:0000:a1:00): {xid}, Timeout after 45s of waiting for RPC response from GPU6 GSP!"
    assert judge(scan(kmsg(line)), gpus=[gpu(0, "00000000:A1:00.0")]).status is status


def test_a_foreign_clients_api_mismatch_on_a_node_whose_nvml_works_is_that_clients() -> None:
    """NVML refuses to start across a mismatch (NVML_ERROR_LIB_RM_VERSION_MISMATCH): a started NVML's version is the
    module's, so the refused client brought its own libraries (E4S-Project/e4s#172: an image bundling them)."""
    record = (
        "NVRM: API mismatch: the client has the version 550.54.15, but\\x0aNVRM: this kernel module has the version "
        "580.95.05.  Please\\x0aNVRM: make sure that this kernel module and all NVIDIA driver\\x0aNVRM: components have "
        "the same version."
    )
    result = judge(
        scan(kmsg(record)),
        gpus=[gpu(0, "00000000:3B:00.0")],
        driver_version="580.95.05",
        versions={"kernel_module": "580.95.05", "userspace": None},
    )
    assert result.code == "driver.client_mismatch" and result.fault_class == "image"


def test_a_gpu_instance_number_is_not_carried_across_a_reload() -> None:
    xid119 = XID119.replace("0001:6c:00", "0000:41:00").replace("GPU5", "GPU0")
    found = scan(kmsg(START, BANNER, xid119, START, BANNER, HEARTBEAT.replace("GPU6", "GPU0")))
    (beat,) = [d for d in found["driver"] if d["kind"] == "gsp_heartbeat"]
    assert beat["pci"] is None  # GPU0 of the new load is not 0000:41:00 of the old one


def test_control_characters_of_a_process_name_never_reach_the_output() -> None:
    record = (
        "NVRM: API mismatch: the client '\\x1b]0;pwn\\x07\\x1b[31m' (pid 4242)\\x0aNVRM: has the version 5"
    )
    found = scan(
        kmsg(record + "50.54.15, but this kernel module has\\x0aNVRM: the version 580.95.05.  Please")
    )
    result = judge(
        found,
        gpus=[gpu(0, "00000000:3B:00.0")],
        versions={"kernel_module": "580.95.05", "userspace": "580.95.05"},
    )
    assert not any(ord(c) < 32 for c in result.summary)


def test_an_invalid_bar_the_driver_went_on_with_warns() -> None:
    """535 to 575 print an invalid BAR1/BAR2 and go on with the probe (nv-pci.c, 'ignore invalid BAR failure')."""
    bar = "NVRM: This PCI I/O region assigned to your NVIDIA device is invalid:\\x0aNVRM: BAR1 is 0M @ 0x0 (PCI:0000:01:00.0)"
    read = judge(scan(kmsg(bar)), gpus=[gpu(0, "00000000:01:00.0")], pci_gpus=["0000:01:00.0"])
    assert read.status is Status.WARN and read.code == "gpu.bar_invalid"
    assert node_fault(judge(scan(kmsg(bar)), pci_gpus=["0000:01:00.0"], **NOT_LOADED))


def test_a_flattened_fallen_off_the_bus_quote_is_read() -> None:
    line = "NVRM: The NVIDIA GPU 0000:05:00.0 installed in this system has fallen off the bus and is not responding to commands."
    assert [b["pci"] for b in scan(kmsg(line))["bus"]] == ["0000:05:00"]


def test_a_legacy_display_gpu_beside_working_gpus_warns_and_is_not_lost() -> None:
    legacy = (
        "NVRM: The NVIDIA Quadro NVS 295 GPU installed in this system is\\x0aNVRM:  supported through the NVIDIA "
        "340.xx Legacy drivers. Please\\x0aNVRM:  visit http://www.nvidia.com/object/unix.html for more\\x0aNVRM:  "
        "information.  The 535.183.01 NVIDIA driver will ignore\\x0aNVRM:  this GPU.  Continuing probe..."
    )
    state = {
        "pci_gpus": ["0000:18:00.0", "0000:2a:00.0", "0000:03:00.0"],
        "access": {
            "driver_gpus": {"0000:18:00": {"minor": 0}, "0000:2a:00": {"minor": 1}},
            "proc_view": "host",
        },
    }
    result = judge(
        scan(kmsg(START, legacy, BANNER)),
        gpus=[gpu(0, "00000000:18:00.0"), gpu(1, "00000000:2A:00.0")],
        **state,
    )
    assert result.status is Status.WARN and result.code == "gpu.unsupported_by_driver"
    assert "PCI 0000:03:00.0" in result.summary and "gpu.lost" not in result.measured["codes"]


def test_continuation_shaped_lines_never_make_a_record_longer_than_the_kernels() -> None:
    dump = [
        f"4,{i},1000000,c;NVRM:     RISC-V CSR State: mstatus:0x{i:016x} mscratch:0x0 mie:0x0"
        for i in range(3000)
    ]
    from envcheck.probe.log_records import RECORD_MAX, messages, parse_records

    assert max(len(r.text) for r in messages(parse_records(dump))) < RECORD_MAX
