"""Slurm's view as its clients print it: `scontrol show ... -o` lines and sdiag's header, verbatim.

Records: the step and node lines were printed by Debian's slurm-wlm 22.05 on the multi-node fixture of
tests/cluster/multinode.py; sdiag's header is from a public report (`sdiag output at Wed Feb 23 01:39:54 2022
(1645609194)`, sdiag's _print_stats format `sdiag output at %s (%ld)`, SchedMD/slurm src/sdiag/sdiag.c). The live
clients run against a real Slurm in tests/cluster/test_multinode_faults.py (clock skew, missing ranks)."""

from __future__ import annotations

import time

from envcheck.probe import slurm_view

STEP = (
    "StepId=26.0 UserId=0 StartTime=2026-11-28T19:09:27 TimeLimit=UNLIMITED State=RUNNING Partition=debug "
    "NodeList=n[1-2] Nodes=2 CPUs=4 Tasks=2 Name=sleep Network=(null) TRES=cpu=4,mem=0,node=2 ResvPorts=(null) "
    "CPUFreqReq=Default Dist=Block SrunHost:Pid=vm:31746"
)
NODE = (
    "NodeName=n2 Arch=x86_64 CoresPerSocket=1  CPUAlloc=0 CPUEfctv=2 CPUTot=2 CPULoad=8.26 AvailableFeatures=(null) "
    "ActiveFeatures=(null) Gres=(null) NodeAddr=10.77.0.12 NodeHostName=n2 Version=22.05.8 OS=Linux "
    "6.18.44-fc-v782 #1 SMP PREEMPT_DYNAMIC @0  RealMemory=1000 AllocMem=0 FreeMem=12772 Sockets=2 Boards=1 "
    "State=IDLE+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=debug  "
    "BootTime=2026-11-28T18:43:56 SlurmdStartTime=2026-11-28T18:54:48 LastBusyTime=2026-11-28T19:41:30 "
    "CfgTRES=cpu=2,mem=1000M,billing=2 AllocTRES= CapWatts=n/a CurrentWatts=0 AveWatts=0 ExtSensorsJoules=n/s "
    "ExtSensorsWatts=0 ExtSensorsTemp=n/s Reason=envcheck test: a drain reason with spaces [root@2026-11-28T19:45:09]"
)
SDIAG = """*******************************************************
sdiag output at Wed Feb 23 01:39:54 2022 (1645609194)
Data since      Wed Feb 23 01:23:40 2022 (1645608220)
*******************************************************
Server thread count:  3
"""


def test_one_line_fields_keep_values_with_spaces() -> None:
    step = slurm_view.fields(STEP)
    assert (
        step["StartTime"] == "2026-11-28T19:09:27" and step["NodeList"] == "n[1-2]" and step["Tasks"] == "2"
    )
    assert step["SrunHost:Pid"] == "vm:31746" and step["TRES"] == "cpu=4,mem=0,node=2"
    node = slurm_view.fields(NODE)
    assert node["NodeAddr"] == "10.77.0.12" and node["State"] == "IDLE+DRAIN" and node["AllocTRES"] == ""
    assert node["OS"] == "Linux 6.18.44-fc-v782 #1 SMP PREEMPT_DYNAMIC @0"
    assert node["Reason"] == "envcheck test: a drain reason with spaces [root@2026-11-28T19:45:09]"


def test_slurm_times_are_read_in_this_process_time_zone() -> None:
    stamp = slurm_view.slurm_time("2026-11-28T19:09:27")
    assert (
        stamp is not None
        and time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(stamp)) == "2026-11-28T19:09:27"
    )
    assert slurm_view.slurm_time("Unknown") is None


def test_sdiags_header_gives_the_controllers_epoch() -> None:
    assert slurm_view.sdiag_epoch(SDIAG) == 1645609194
    assert slurm_view.sdiag_epoch("No data available. Probably slurmctld is not working\n") is None
