"""gpu.health's words on the nvidia module follow what the kernel's own list says of it: a module the kernel lists
as Loading or Unloading (/sys/module/<name>/initstate 'coming' or 'going', Documentation/ABI/testing/sysfs-module;
/proc/modules' state column, kernel/module/procfs.c m_show) is listed, not absent. Nothing staged: the verdict on
captured states."""

from __future__ import annotations

import pytest

from envcheck.checks.gpu_health.verdict import verdict
from envcheck.core.check import CheckOptions, Context
from envcheck.core.result import Status

PROLOG = Context(options=CheckOptions(cluster_mode="prolog"))


def _state(modules: object) -> dict[str, object]:
    return {
        "nvml_error": "NVML could not start: Driver Not Loaded",
        "nvml_code": 9,
        "gpus": [],
        "pci_gpus": ["0000:3b:00.0"],
        "kernel_log": {"source": "/dev/kmsg", "error": None, "xid": [], "bus": [], "driver": []},
        "access": {"device_nodes": {}, "proc_view": "absent", "in_container": False},
        "modules": modules,
    }


@pytest.mark.parametrize("state", ["Loading", "Unloading"])
def test_a_module_the_kernel_lists_mid_load_is_not_said_to_be_absent(state: str) -> None:
    result = verdict(_state({"nvidia": state}), PROLOG)
    assert result.status is Status.FAIL, result.summary
    assert "lists no nvidia module" not in result.summary, result.summary
    assert state in result.summary, result.summary


def test_its_twin_a_module_the_kernel_does_not_list_is_said_so() -> None:
    result = verdict(_state({}), PROLOG)
    assert result.status is Status.FAIL and "the kernel lists no nvidia module" in result.summary
