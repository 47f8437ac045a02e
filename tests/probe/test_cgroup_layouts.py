"""envcheck.probe.cgroup on staged /proc/self/cgroup + mountinfo files and cgroup trees, one per layout (real cgroups:
tests/probe/test_cgroup_real.py). Staged: the files, under a prefix standing for '/'; real: the reader.

Sources of the texts: the kernel's Documentation/admin-guide/cgroup-v2.rst ("0::$PATH", "0::/batchjobs/container_id1"
and, in a namespace, "0::/"); openjdk/jdk test/jdk/jdk/internal/platform/cgroup/TestCgroupSubsystemFactory.java
(mountinfo and /proc/self/cgroup of a cgroup v2 host, a hybrid host, joined v1 controllers and a Kubernetes
containerd pod whose cgroup path holds colons), quoted verbatim below; Slurm's cgroup/v2 plugin's job hierarchy
(slurm.schedmd.com/cgroup_v2.html: system.slice/slurmstepd.scope/job_<id>/step_<id>/user/task_<id>).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from envcheck.probe.cgroup import Limits, limits_facts, members, mounts, own_limits

V2_MOUNT = "28 21 0:25 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 none rw,seclabel,nsdelegate"
HYBRID_MOUNTS = (  # openjdk's mntInfoHybrid
    "30 23 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:4 - tmpfs tmpfs ro,seclabel,mode=755\n"
    "31 30 0:27 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:5 - cgroup2 none rw,seclabel,"
    "nsdelegate\n"
    "32 30 0:28 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:6 - cgroup none rw,seclabel,xattr,"
    "name=systemd\n"
    "35 30 0:31 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:7 - cgroup none rw,seclabel,memory\n"
    "36 30 0:32 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:8 - cgroup none rw,seclabel,pids\n"
    "40 30 0:36 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:12 - cgroup none rw,seclabel,"
    "cpu,cpuacct\n"
    "42 30 0:38 / /sys/fs/cgroup/cpuset rw,nosuid,nodev,noexec,relatime shared:14 - cgroup none rw,seclabel,cpuset\n"
)
SESSION = (  # openjdk's cgroupv1SelfCgroupContent (lines of controllers this layout does not mount left out)
    "11:memory:/user.slice/user-1000.slice/user@1000.service\n"
    "9:cpuset:/\n"
    "8:pids:/user.slice/user-1000.slice/user@1000.service\n"
    "2:cpu,cpuacct:/\n"
    "1:name=systemd:/user.slice/user-1000.slice/user@1000.service/apps.slice/apps-org.gnome.Terminal.slice/"
    "vte-spawn-3c00b338-5b65-439f-8e97-135e183d135d.scope\n"
    "0::/user.slice/user-1000.slice/user@1000.service/apps.slice/apps-org.gnome.Terminal.slice/"
    "vte-spawn-3c00b338-5b65-439f-8e97-135e183d135d.scope\n"
)
POD = (  # openjdk's cgroupv1SelfColonsContent and the memory line of mntInfoColons: the mount's root is the pod's cgroup
    "/system.slice/containerd.service/kubepods-burstable-podf65e797d_d5f9_4604_9773_94f4bb9946a0.slice:"
    "cri-containerd:86ac6260f9f8a9c1276748250f330ae9c2fcefe5ae809364ad1e45f3edf7e08a"
)
POD_MOUNT = f"4624 4583 0:31 {POD} /sys/fs/cgroup/memory ro,nosuid,nodev,noexec,relatime master:12 - cgroup cgroup rw,memory\n"
JOINED_MOUNT = (  # openjdk's mntInfoCgroupv1JoinControllers, the joined line
    "38 31 0:33 / /sys/fs/cgroup/cpu,cpuacct,net_cls,net_prio,hugetlb,memory rw,nosuid,nodev,noexec,relatime "
    "shared:17 - cgroup cgroup rw,cpu,cpuacct,memory,net_cls,net_prio,hugetlb\n"
)
JOINED_CGROUP = "2:cpu,cpuacct,memory,net_cls,net_prio,hugetlb:/user.slice/user-1000.slice/session-3.scope\n"
LONG_MAX_PAGES = "9223372036854771712"  # v1's "no limit": PAGE_COUNTER_MAX pages of 4 KiB


def stage(tmp_path: Path, cgroup: str, mountinfo: str, files: dict[str, str]) -> tuple[str, str]:
    """(the /proc directory, the prefix standing for '/') of a staged layout."""
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "cgroup").write_text(cgroup)
    (proc / "mountinfo").write_text(mountinfo)
    for rel, text in files.items():
        path = tmp_path / "root" / rel.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
    return str(proc), str(tmp_path / "root")


def limits(
    tmp_path: Path, cgroup: str, mountinfo: str, files: dict[str, str], pid: int | None = None
) -> Limits:
    proc, prefix = stage(tmp_path, cgroup, mountinfo, files)
    got = own_limits(proc, prefix, pid)
    assert isinstance(got, Limits), got
    return got


def test_v2_container_in_its_own_namespace(tmp_path: Path) -> None:
    """`docker run --cpus 1 --memory 3g --pids-limit 100 --cpuset-cpus 0-3` on a v2 host: "0::/"."""
    cg = "/sys/fs/cgroup"
    got = limits(
        tmp_path,
        "0::/\n",
        V2_MOUNT,
        {
            f"{cg}/cgroup.controllers": "cpuset cpu io memory hugetlb pids rdma",
            f"{cg}/cpu.max": "100000 100000",
            f"{cg}/memory.max": "3221225472",
            f"{cg}/pids.max": "100",
            f"{cg}/cpuset.cpus.effective": "0-3",
        },
    )
    assert (got.layout, got.cpu_quota, got.memory_bytes, got.pids_max, got.cpuset_cpus) == (
        "v2",
        1.0,
        3 << 30,
        100,
        4,
    )
    assert got.cgroups["cpu"] == cg


def test_v2_host_session_takes_the_tightest_ancestor_not_the_root(tmp_path: Path) -> None:
    """A systemd session scope (openjdk's "0::/user.slice/user-1000.slice/session-2.scope"): the quota sits on
    user-1000.slice; /sys/fs/cgroup itself (the hierarchy's root, all the old reader read) has no cpu.max."""
    cg, user = "/sys/fs/cgroup", "/sys/fs/cgroup/user.slice/user-1000.slice"
    got = limits(
        tmp_path,
        "0::/user.slice/user-1000.slice/session-2.scope",
        V2_MOUNT,
        {
            f"{cg}/cgroup.controllers": "cpuset cpu io memory pids",
            f"{cg}/user.slice/memory.max": "8589934592",
            f"{user}/cpu.max": "50000 100000",
            f"{user}/memory.max": "max",
            f"{user}/pids.max": "10813",
            f"{user}/session-2.scope/cpu.max": "max 100000",
            f"{user}/session-2.scope/memory.max": "1073741824",
            f"{user}/session-2.scope/pids.max": "max",
        },
    )
    assert (got.cpu_quota, got.memory_bytes, got.pids_max) == (0.5, 1 << 30, 10813)
    assert got.cgroups["memory"] == f"{user}/session-2.scope"


def test_v2_slurm_job_step_under_its_jobs_limits(tmp_path: Path) -> None:
    job = "/sys/fs/cgroup/system.slice/slurmstepd.scope/job_42"
    got = limits(
        tmp_path,
        "0::/system.slice/slurmstepd.scope/job_42/step_0/user/task_0\n",
        V2_MOUNT,
        {
            "/sys/fs/cgroup/cgroup.controllers": "cpuset cpu io memory pids",
            f"{job}/cpu.max": "400000 100000",
            f"{job}/memory.max": "17179869184",
            f"{job}/step_0/user/task_0/cpu.max": "max 100000",
            f"{job}/step_0/user/task_0/cpuset.cpus.effective": "0-1,4-5",
        },
    )
    assert (got.cpu_quota, got.memory_bytes, got.cpuset_cpus) == (4.0, 16 << 30, 4)


def test_v1_hybrid_host_reads_each_controller_where_it_is_mounted(tmp_path: Path) -> None:
    """openjdk's hybrid host: memory and pids under user@1000.service, cpu at its hierarchy's root, v2 beside."""
    service = "user.slice/user-1000.slice/user@1000.service"
    got = limits(
        tmp_path,
        SESSION,
        HYBRID_MOUNTS,
        {
            f"/sys/fs/cgroup/memory/{service}/memory.limit_in_bytes": "2147483648",
            f"/sys/fs/cgroup/memory/{service}/memory.stat": f"cache 0\nhierarchical_memory_limit {LONG_MAX_PAGES}",
            f"/sys/fs/cgroup/pids/{service}/pids.max": "500",
            "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "-1",
            "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000",
            "/sys/fs/cgroup/cpuset/cpuset.effective_cpus": "0-7",
        },
    )
    assert got.layout == "hybrid" and got.cpu_quota is None and got.cpuset_cpus == 8
    assert (got.memory_bytes, got.pids_max) == (2 << 30, 500)
    assert got.cgroups["pids"] == f"/sys/fs/cgroup/pids/{service}"


def test_v1_pod_whose_mount_root_is_its_own_cgroup_with_colons(tmp_path: Path) -> None:
    got = limits(
        tmp_path,
        f"11:memory:{POD}\n",
        POD_MOUNT,
        {"/sys/fs/cgroup/memory/memory.limit_in_bytes": "1073741824"},
    )
    assert got.memory_bytes == 1 << 30 and got.cgroups["memory"] == "/sys/fs/cgroup/memory"
    assert got.unread["cpu"] == "not in any mounted hierarchy"


def test_v1_joined_controllers_and_the_no_limit_values(tmp_path: Path) -> None:
    mount = "/sys/fs/cgroup/cpu,cpuacct,net_cls,net_prio,hugetlb,memory"
    got = limits(
        tmp_path,
        JOINED_CGROUP,
        JOINED_MOUNT,
        {
            f"{mount}/user.slice/cpu.cfs_quota_us": "150000",
            f"{mount}/user.slice/cpu.cfs_period_us": "100000",
            f"{mount}/user.slice/user-1000.slice/session-3.scope/cpu.cfs_quota_us": "-1",
            f"{mount}/user.slice/user-1000.slice/session-3.scope/cpu.cfs_period_us": "100000",
            f"{mount}/user.slice/user-1000.slice/session-3.scope/memory.limit_in_bytes": LONG_MAX_PAGES,
        },
    )
    assert got.cpu_quota == 1.5 and got.memory_bytes is None


def test_v1_container_without_a_namespace_and_a_limit_above_its_mount(tmp_path: Path) -> None:
    """Docker on v1: "/docker/<id>" mounted as the root; the memory limit of a parent outside the container shows
    only in memory.stat's hierarchical_memory_limit."""
    cid = "/docker/4f2b3c6d9e"
    mountinfo = (
        f"1041 1036 0:31 {cid} /sys/fs/cgroup/cpu,cpuacct ro,nosuid,nodev,noexec,relatime master:12 - cgroup cgroup "
        "rw,cpu,cpuacct\n"
        f"1043 1036 0:33 {cid} /sys/fs/cgroup/memory ro,nosuid,nodev,noexec,relatime master:14 - cgroup cgroup "
        "rw,memory\n"
    )
    got = limits(
        tmp_path,
        f"12:cpu,cpuacct:{cid}\n10:memory:{cid}\n",
        mountinfo,
        {
            "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "250000",
            "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000",
            "/sys/fs/cgroup/memory/memory.limit_in_bytes": LONG_MAX_PAGES,
            "/sys/fs/cgroup/memory/memory.stat": "cache 4096\nhierarchical_memory_limit 2147483648\nrss 0",
        },
    )
    assert (got.cpu_quota, got.memory_bytes) == (2.5, 2 << 30)


def test_a_namespace_made_after_the_mount_is_found_by_pid(tmp_path: Path) -> None:
    """`unshare --cgroup` after the mount: the path reads "/" and the mount's root "/../.."."""
    mountinfo = "30 23 0:26 /../.. /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw\n"
    job = "/sys/fs/cgroup/batchjobs/container_id1"
    got = limits(
        tmp_path,
        "0::/\n",
        mountinfo,
        {
            "/sys/fs/cgroup/cgroup.controllers": "cpu memory pids",
            "/sys/fs/cgroup/cgroup.procs": "1\n2",
            f"{job}/cgroup.procs": "4242",
            f"{job}/cpu.max": "200000 100000",
        },
        pid=4242,
    )
    assert got.cpu_quota == 2.0 and got.cgroups["cpu"] == job


def test_octal_escapes_and_a_removed_cgroup(tmp_path: Path) -> None:
    line = "40 30 0:26 / /mnt/cgroup\\040v2 rw - cgroup2 cgroup2 rw\n"
    assert mounts(line)[0].mountpoint == "/mnt/cgroup v2"
    assert members("0::/a/b (deleted)\n")[0].path == "/a/b"


def test_a_controller_v2_does_not_enable_is_named(tmp_path: Path) -> None:
    got = limits(tmp_path, "0::/\n", V2_MOUNT, {"/sys/fs/cgroup/cgroup.controllers": "memory pids"})
    assert (
        got.unread["cpu"] == "the cpu controller is not enabled in /sys/fs/cgroup" and got.cpu_quota is None
    )


@pytest.mark.parametrize(
    "cgroup, mountinfo, why",
    [
        (None, V2_MOUNT, "cgroup or"),
        ("0::/\n", "22 1 0:21 / /proc rw,nosuid - proc proc rw\n", "no cgroup filesystem is mounted here"),
    ],
)
def test_unreadable_says_why(tmp_path: Path, cgroup: str | None, mountinfo: str, why: str) -> None:
    proc, prefix = stage(tmp_path, cgroup or "", mountinfo, {})
    if cgroup is None:
        (Path(proc) / "cgroup").unlink()
    got = own_limits(proc, prefix)
    assert isinstance(got, str) and why in got
    if cgroup is None:
        assert "not readable" in limits_facts(proc, prefix)["version"]["absent"]


def test_the_facts_view(tmp_path: Path) -> None:
    proc, prefix = stage(
        tmp_path,
        "0::/\n",
        V2_MOUNT,
        {
            "/sys/fs/cgroup/cgroup.controllers": "cpu memory pids",
            "/sys/fs/cgroup/cpu.max": "50000 100000",
            "/sys/fs/cgroup/memory.max": "1073741824",
        },
    )
    out = limits_facts(proc, prefix)
    assert out["version"] == 2 and out["cpu_quota"] == 0.5 and out["cpus_usable"] == 1
    assert out["memory_limit_gib"] == 1.0 and out["pids_max"] == "max"
