"""The slurm.conf lines the single-node (conftest.py) and the multi-node (multinode.py) fixtures share: root
daemons, one munged socket, state, spool, pid and log paths under the fixture's folder, no accounting, and the
prolog under test. Each fixture adds its controller, ports and nodes."""

from __future__ import annotations

from pathlib import Path


def common_lines(d: Path, per_node: str = "") -> str:
    """The shared settings; `per_node` ('%n' with several slurmd on one machine) keeps their paths apart."""
    spool = f"{d}/spool/{per_node}" if per_node else f"{d}/spool"
    suffix = f"-{per_node}" if per_node else ""
    return f"""SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={d}/munge/socket
StateSaveLocation={d}/state
SlurmdSpoolDir={spool}
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd{suffix}.pid
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/linear
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=5
KillWait=5
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd{suffix}.log
Prolog={d}/prolog.sh
"""
