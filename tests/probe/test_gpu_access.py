"""Which GPUs a process was given (probe.gpu_access.allocation): the rule on the facts each deployment shows.

Pure: the facts are written as the live reader returns them (the staged node of tests/cluster/test_shared_nodes.py
reads them live, in each shape). A GPU lost at boot must never pass as 'not given'.
"""

from __future__ import annotations

from pathlib import Path

from envcheck.probe.gpu_access import allocation, not_given, proc_view, visible_list

PCI = [f"0000:{b}:00.0" for b in ("18", "2a", "3a", "5d", "9a", "ab", "b3", "db")]
DRIVER = {
    f"0000:{b}:00": {"minor": i, "uuid": f"GPU-{i}", "model": "H100"}
    for i, b in enumerate(("18", "2a", "3a", "5d", "9a", "ab", "b3", "db"))
}


def facts(**changes: object) -> dict[str, object]:
    base: dict[str, object] = {
        "device_nodes": {str(i): "ok" for i in range(8)},
        "driver_gpus": DRIVER,
        "proc_view": "host",
        "nvidia_visible_devices": None,
        "visible_list": None,
        "in_container": False,
    }
    return base | changes


def test_a_host_is_the_whole_node_even_with_a_device_node_missing() -> None:
    """A GPU lost at boot has no /dev node and no driver entry: on a host that is a lost GPU, judged."""
    lost_at_boot = facts(
        device_nodes={str(i): "ok" for i in range(7)},
        driver_gpus={k: v for k, v in DRIVER.items() if k != "0000:db:00"},
    )
    assert allocation(lost_at_boot, PCI).whole_node


def test_a_device_cgroup_gives_the_minors_it_allows() -> None:
    got = allocation(facts(device_nodes={str(i): "ok" if i in (0, 1) else "EPERM" for i in range(8)}), PCI)
    assert not got.whole_node and got.buses == {"0000:18:00", "0000:2a:00"} and got.count == 2
    assert "EPERM" in got.source and not_given(got, PCI) == PCI[2:]


def test_the_toolkits_proc_view_gives_its_listed_gpus_when_visible_devices_names_them() -> None:
    one = {"0000:5d:00": DRIVER["0000:5d:00"]}
    got = allocation(
        facts(
            proc_view="toolkit",
            driver_gpus=one,
            device_nodes={"3": "ok"},
            nvidia_visible_devices="GPU-3",
            visible_list=["GPU-3"],
            in_container=True,
        ),
        PCI,
    )
    assert got.buses == {"0000:5d:00"} and got.count == 1 and "container toolkit" in got.source


def test_a_container_given_all_gpus_is_the_whole_node() -> None:
    """--gpus all: the toolkit lists what the driver has; a GPU lost at boot is the node's, not 'not given'."""
    seven = {k: v for k, v in DRIVER.items() if k != "0000:b3:00"}
    got = allocation(
        facts(
            proc_view="toolkit",
            driver_gpus=seven,
            device_nodes={str(m): "ok" for m in (0, 1, 2, 3, 4, 5, 7)},
            nvidia_visible_devices="all",
            visible_list=None,
            in_container=True,
        ),
        PCI,
    )
    assert got.whole_node


def test_a_cdi_container_is_given_its_device_nodes() -> None:
    got = allocation(
        facts(
            device_nodes={"2": "ok", "5": "ok"},
            nvidia_visible_devices="void",
            visible_list=[],
            in_container=True,
        ),
        PCI,
    )
    assert got.buses == {"0000:3a:00", "0000:ab:00"} and "device nodes" in got.source


def test_visible_devices_forms(tmp_path: Path) -> None:
    assert visible_list(None) is None and visible_list("all") is None and visible_list("void") == []
    assert visible_list("0,3") == ["0", "3"] and visible_list("GPU-a, GPU-b") == ["GPU-a", "GPU-b"]
    (tmp_path / "GPU-a").touch()  # the device plugin's volume-mounts strategy: one entry per GPU
    assert visible_list(str(tmp_path)) == ["GPU-a"]


def test_proc_view_reads_mountinfo(tmp_path: Path) -> None:
    proc = tmp_path / "nvidia"
    proc.mkdir()
    info = tmp_path / "mountinfo"
    info.write_text(f"30 25 0:5 / {proc} rw,nosuid - tmpfs tmpfs rw,mode=555\n")
    assert proc_view(str(proc), str(info)) == "toolkit"
    info.write_text(f"22 1 0:21 / /proc rw - proc proc rw\n30 25 0:5 / {proc} rw - proc proc rw\n")
    assert proc_view(str(proc), str(info)) == "host"
    assert proc_view(str(tmp_path / "absent"), str(info)) == "absent"
