"""Kernel modules as the kernel lists them, the direct source for "is nvidia_uvm loaded": a missing /dev/nvidia-uvm or
/proc/driver/nvidia is only a proxy (a container can lack the node while the host has the module loaded).

Two of the kernel's own lists, read in this order:
- /sys/module/<name>/initstate: "live", "coming" or "going" for a loaded module (Documentation/ABI/testing/
  sysfs-module); a module that is not loaded has no directory there (a built-in one has no initstate, and no NVIDIA
  module is built in);
- /proc/modules, one line per loaded module: name, size, reference count, users, state (Live, Loading, Unloading),
  address (kernel/module/procfs.c, m_show), where sysfs is not mounted.
Neither is namespaced: a container reads the host's modules.
"""

from __future__ import annotations

import os

from envcheck.probe.system import read_text

SYS_MODULE = "/sys/module"
PROC_MODULES = "/proc/modules"
NVIDIA_MODULES = ("nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_drm", "nvidia_peermem", "nvidia_fs")
_INITSTATE = {"live": "Live", "coming": "Loading", "going": "Unloading"}


def loaded_modules(path: str = PROC_MODULES) -> dict[str, str] | str:
    """Each module the kernel lists, by name, with its state ('Live', 'Loading', 'Unloading'), or why the list
    cannot be read."""
    text = read_text(path)
    if text is None:
        return f"{path} cannot be read"
    out: dict[str, str] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 5:
            out[fields[0]] = fields[4]
    return out


def nvidia_modules(sysfs: str = SYS_MODULE, proc: str = PROC_MODULES) -> dict[str, str] | str:
    """The NVIDIA driver's modules the kernel has loaded, by name and state (an empty dict: none), from sysfs, else
    /proc/modules; or why neither can be read."""
    if os.path.isdir(sysfs):
        out = {}
        for name in NVIDIA_MODULES:
            state = read_text(os.path.join(sysfs, name, "initstate"))
            if state is not None:
                out[name] = _INITSTATE.get(state.strip(), state.strip())
        return out
    listed = loaded_modules(proc)
    if isinstance(listed, str):
        return f"neither {sysfs} nor {proc} can be read"
    return {name: state for name, state in listed.items() if name in NVIDIA_MODULES}


def module_loaded(modules: object, name: str) -> bool | None:
    """Whether the kernel lists `name` as Live in a captured `nvidia_modules` answer; None when it could not be
    read (a bundle without it, or no list readable)."""
    if not isinstance(modules, dict):
        return None
    return modules.get(name) == "Live"
