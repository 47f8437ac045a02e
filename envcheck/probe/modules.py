"""Kernel modules as the kernel lists them: /proc/modules, one line per loaded module (name, size, reference count,
users, state Live/Loading/Unloading, address; the kernel's kernel/module/procfs.c, m_show). It is the direct source
for "is nvidia_uvm loaded": a missing /dev/nvidia-uvm or /proc/driver/nvidia is only a proxy (a container can lack the
node while the host has the module). /proc/modules is not namespaced, so a container reads the host's list."""

from __future__ import annotations

from envcheck.probe.system import read_text

PROC_MODULES = "/proc/modules"
NVIDIA_MODULES = ("nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_drm", "nvidia_peermem", "nvidia_fs")


def loaded_modules(path: str = PROC_MODULES) -> dict[str, str] | str:
    """Each loaded module's state by name ('Live', 'Loading', 'Unloading'), or why the list cannot be read."""
    text = read_text(path)
    if text is None:
        return f"{path} cannot be read"
    out: dict[str, str] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 5:
            out[fields[0]] = fields[4]
    return out


def nvidia_modules(path: str = PROC_MODULES) -> dict[str, str] | str:
    """The NVIDIA driver's modules the kernel has loaded, by name and state (an empty dict: none), or why the list
    cannot be read."""
    loaded = loaded_modules(path)
    if isinstance(loaded, str):
        return loaded
    return {name: state for name, state in loaded.items() if name in NVIDIA_MODULES}


def module_loaded(modules: object, name: str) -> bool | None:
    """Whether the kernel lists `name` as Live in a captured `nvidia_modules` answer; None when it could not be
    read (a bundle without it, or /proc/modules unreadable)."""
    if not isinstance(modules, dict):
        return None
    return modules.get(name) == "Live"
