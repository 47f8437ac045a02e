"""NVIDIA GPUs on the PCI bus, from sysfs: what the hardware enumerates, whatever the driver or NVML says.

A GPU that fell off the bus keeps its PCI function in sysfs (or is re-enumerated) while NVML stops listing it,
so the two counts side by side name the missing GPU. Vendor 0x10de is NVIDIA; PCI class 0x0300 is a VGA
controller, 0x0302 a 3D controller (data-center GPUs), per the PCI ID repository's class list; NVSwitches
(0x0680, bridge) and the GPUs' audio functions (0x0403) are not GPUs.
"""

from __future__ import annotations

import os

SYSFS_PCI = "/sys/bus/pci/devices"
NVIDIA = "0x10de"
GPU_CLASSES = ("0x0300", "0x0302")
NVSWITCH_CLASS = (
    "0x0680"  # PCI class "bridge, other": how an NVSwitch enumerates (lspci: "Bridge: NVIDIA ...")
)


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read(64).strip().lower()
    except OSError:
        return ""


def _functions(root: str, classes: tuple[str, ...]) -> list[str] | str:
    """Sorted PCI addresses of NVIDIA functions whose class starts with one of `classes`, or why sysfs cannot tell."""
    try:
        names = sorted(os.listdir(root))
    except OSError as exc:
        return f"{root}: {exc.strerror}"
    return [
        name
        for name in names
        if _read(os.path.join(root, name, "vendor")) == NVIDIA
        and _read(os.path.join(root, name, "class"))[:6] in classes
    ]


def pci_gpus(root: str = SYSFS_PCI) -> list[str] | str:
    """Sorted PCI addresses ('0000:b3:00.0') of NVIDIA display/3D functions, or why sysfs cannot tell."""
    return _functions(root, GPU_CLASSES)


def pci_nvswitches(root: str = SYSFS_PCI) -> list[str] | str:
    """Sorted PCI addresses of NVIDIA NVSwitch functions (a board whose GPUs are wired to each other by NVLink), or
    why sysfs cannot tell."""
    return _functions(root, (NVSWITCH_CLASS,))


def bus_key(address: str) -> str:
    """'0000:b3:00' for '0000:b3:00.0' or NVML's '00000000:B3:00.0' (domain:bus:device, lower case)."""
    parts = address.strip().lower().split(":")
    if len(parts) != 3:
        return address.strip().lower()
    try:
        return f"{int(parts[0], 16):04x}:{int(parts[1], 16):02x}:{int(parts[2].split('.')[0], 16):02x}"
    except ValueError:
        return address.strip().lower()


def pci_drivers(root: str = SYSFS_PCI) -> dict[str, str]:
    """The kernel driver bound to each NVIDIA GPU function ('nvidia', 'nouveau', 'vfio-pci'), from its `driver` link;
    a function without one is left out (bound to none, or a sysfs that does not say)."""
    bus = pci_gpus(root)
    out = {}
    for name in bus if isinstance(bus, list) else []:
        try:
            out[name] = os.path.basename(os.readlink(os.path.join(root, name, "driver")))
        except OSError:
            continue
    return out
